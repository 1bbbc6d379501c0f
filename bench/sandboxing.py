"""The benches' sandboxes: a fresh directory with the nodes' load profiles, stopping a sandbox while
keeping its schedulers' logs and its components' last lines, yielding the CPU to the schedulers under
test, and the trace benches' sandbox from start to stop."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from bench.commanding import Report
from promsched.kube.configuring import from_kubeconfig
from promsched.kube.credentials import Credentials
from promsched.sandbox import launching
from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor
from promsched.sandbox.demoing import install_crd


def prepare(workdir: Path | None, name: str, nodes: int, profiles: dict[str, Any]) -> tuple[Path, Path]:
    """A fresh directory `promsched-NAME-NODES-*` under `workdir` (default: the temp dir) for a sandbox,
    and the file of the nodes' profiles written into it: (directory, profiles file)."""
    base = workdir or Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix=f"promsched-{name}-{nodes}-", dir=base))
    profiles_file = directory / f"{name}-profiles.yaml"
    profiles_file.write_text(yaml.safe_dump({"nodes": profiles}, sort_keys=False))
    return directory, profiles_file


def yield_cpu(directory: Path, niceness: int) -> list[str]:
    """Run every process the sandbox in `directory` has started (each leads a session of its own: the API
    server, etcd, kwok, Prometheus) at `niceness`, thread by thread, since Linux keeps a niceness per
    thread and a thread inherits it from the one that starts it. Schedulers started afterwards keep the
    bench's own, so on shared cores the OS runs them first, as if they had cores of their own. Returns
    the names of the processes reniced."""
    leaders = {process.pid: process.name for process in Supervisor(directory).recorded() if process.alive()}
    reniced = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            if (leader := os.getsid(int(entry.name))) in leaders:
                for thread in (entry / "task").iterdir():
                    os.setpriority(os.PRIO_PROCESS, int(thread.name), niceness)
                reniced.add(leaders[leader])
    return sorted(reniced)


COMPONENT_LOG_BYTES = 1024 * 1024  # the end of each component's log, where a failed start shows why


def stop_sandbox(directory: Path, logs: Path) -> None:
    """Stop the sandbox in `directory` and remove it, keeping in `logs` the schedulers' logs (bench-*.log)
    whole and the last `COMPONENT_LOG_BYTES` of every other (kwok, kube-apiserver, ...)."""
    launching.down(directory, lambda _line: None)
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    for log in (directory / "logs").glob("*.log"):
        if log.name.startswith("bench-"):
            shutil.copy(log, logs / log.name)
        else:
            keep_tail(log, logs / log.name, COMPONENT_LOG_BYTES)
    shutil.rmtree(directory, ignore_errors=True)


def keep_tail(source: Path, target: Path, size: int) -> None:
    """Copy the last `size` bytes of `source` to `target`."""
    with source.open("rb") as log:
        log.seek(max(0, source.stat().st_size - size))
        target.write_bytes(log.read())


@contextlib.contextmanager
def sandbox_for_trace(
    directory: Path, nodes: int, profiles_file: Path, history: float, logs: Path, report: Report
) -> Iterator[tuple[Sandbox, Credentials]]:
    """A sandbox of `nodes` with the CRD installed and its credentials; stopped (logs kept) at the end."""
    try:
        report(f"== {nodes} nodes: starting a sandbox in {directory}")
        sandbox = launching.up(
            directory, nodes=nodes, profiles_file=profiles_file, history=history, report=report
        )
        install_crd(sandbox)
        yield sandbox, from_kubeconfig(sandbox.kubeconfig)
    finally:
        report(f"== {nodes} nodes: stopping the sandbox")
        stop_sandbox(directory, logs)
