"""A running sandbox as its users see it: where its files are, its endpoints, and kubectl against it.

The state of a sandbox is `DIR/sandbox.json`, written by `up` once every component is started; everything
here reads that file, so any process (the CLI, a test fixture, the demo) can use a sandbox another started.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path(".sandbox")


class SandboxError(RuntimeError):
    """The sandbox is not in the state an operation needs; the message says what to do."""


@dataclass(frozen=True)
class SandboxState:
    directory: str
    bin_dir: str
    release: str
    node_names: list[str]
    ports: dict[str, int]
    # The Unix time of the first scrape after the backfilled history, when the sandbox became ready: up to
    # it every node's metrics are exactly its initial profile, and a query at it needs no extrapolation.
    ready_at: float = 0.0

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['prometheus']}"

    @property
    def exporter_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['exporter']}"

    @property
    def apiserver_url(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"


@dataclass(frozen=True)
class Sandbox:
    directory: Path
    state: SandboxState

    @classmethod
    def load(cls, directory: Path = DEFAULT_DIR) -> Sandbox:
        state_file = directory / "sandbox.json"
        if not state_file.exists():
            raise SandboxError(
                f"no sandbox in {directory}; start one with `promsched sandbox up --dir {directory}`"
            )
        return cls(directory.resolve(), SandboxState(**json.loads(state_file.read_text())))

    def save(self) -> None:
        (self.directory / "sandbox.json").write_text(json.dumps(asdict(self.state), indent=1))

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def prometheus_url(self) -> str:
        return self.state.prometheus_url

    @property
    def node_names(self) -> list[str]:
        return list(self.state.node_names)

    def binary(self, name: str) -> str:
        path = Path(self.state.bin_dir) / name
        if not path.exists():
            # `sandbox up` builds only what it runs; helm and kube-scheduler come with the full install.
            raise SandboxError(f"{path} is not built; `promsched sandbox install` builds every component")
        return str(path)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the sandbox's kubectl with its admin kubeconfig; with `check`, a failure raises with stderr."""
        command = [self.binary("kubectl"), "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(
            command, input=input, capture_output=True, text=True, check=False, timeout=300
        )
        if check and result.returncode != 0:
            raise SandboxError(
                f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result

    def wait_established(self, crd: str, timeout: float = 60.0) -> None:
        """Wait until the CustomResourceDefinition `crd` is Established. `kubectl wait --for=condition=`
        fails at once instead of waiting when the object has no status.conditions yet ("accessor error:
        <nil>"), as a CRD applied a moment ago may not, so the condition is read until it holds."""
        established = '{.status.conditions[?(@.type=="Established")].status}'
        deadline = time.monotonic() + timeout
        while True:
            result = self.kubectl("get", "crd", crd, "-o", f"jsonpath={established}", check=False)
            if result.returncode == 0 and result.stdout.strip() == "True":
                return
            if time.monotonic() > deadline:
                seen = result.stderr.strip() or result.stdout.strip() or "no Established condition"
                raise SandboxError(f"CRD {crd} not Established after {timeout:.0f}s: {seen}")
            time.sleep(0.2)

    def profiles(self) -> dict[str, dict[str, float]]:
        with urllib.request.urlopen(f"{self.state.exporter_url}/profiles", timeout=10) as response:
            document: dict[str, dict[str, float]] = json.load(response)
        return document

    def set_load(self, node: str, **changes: float) -> dict[str, Any]:
        """Change a simulated node's load profile (cpu, memory, disk_busy, disk_used, network)."""
        request = urllib.request.Request(
            f"{self.state.exporter_url}/profiles/{node}",
            data=json.dumps(changes).encode(),
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                updated: dict[str, Any] = json.load(response)
        except urllib.error.HTTPError as error:
            raise SandboxError(f"setting the load of {node}: {error.read().decode().strip()}") from None
        return updated
