"""The image is what the chart runs.

The repository's Dockerfile, built by `promsched sandbox image` (buildah, no Docker daemon), is pushed to
a registry on 127.0.0.1; the chart is installed into the sandbox pointing at it by digest. The sandbox's
nodes are kwok's, where no container runs, so podman runs the Deployment's container as its pod spec,
read back from the API server, says, from an image pulled from that registry into an empty storage. It
must answer the chart's probes, take the Lease, place a policy's pods and write the policy's status, and
end cleanly on SIGTERM within the pod's grace period. The image's packages are the hash lock's.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from promsched.sandbox.builds import imaging
from promsched.sandbox.builds.installing import InstallError
from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor
from support.clusters import pod_manifest, policy_manifest
from support.dockerfiles import REPO, lock_pins, normalized
from support.podman_pods import PodIdentity, podman_run_arguments, port_number, write_service_account_files
from support.polling import eventually
from support.registries import free_port, local_registry

pytestmark = pytest.mark.integration

CHART = REPO / "charts" / "promsched"
PLACED_WITHIN = 90.0


def _suffix() -> str:
    return uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
def built() -> tuple[imaging.ContainerStorage, imaging.BuiltImage]:
    try:
        imaging.install_tools((*imaging.BUILD_PACKAGES, *imaging.REGISTRY_PACKAGES))
    except (InstallError, imaging.ImageError) as error:
        if os.geteuid() == 0:
            raise  # root installs them (CI does): a failure to is the test's
        pytest.skip(f"buildah/podman are missing and cannot be installed without root: {error}")
    storage = imaging.default_storage().prepare()
    return storage, imaging.build(REPO, storage)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


@dataclass(frozen=True)
class Pushed:
    repository: str  # registry host:port/name
    tag: str
    digest: str


@pytest.fixture(scope="module")
def pushed(built: tuple[imaging.ContainerStorage, imaging.BuiltImage], registry: str) -> Pushed:
    storage, image = built
    repository = f"{registry}/promsched"
    tag = image.tagged.rsplit(":", 1)[1]
    digest = imaging.push(storage, image, f"docker://{repository}:{tag}", tls_verify=False)
    return Pushed(repository, tag, digest)


@pytest.fixture
def run_storage() -> Iterator[imaging.ContainerStorage]:
    """An empty storage: what runs is what the registry served, not the build's copy."""
    with tempfile.TemporaryDirectory(prefix="promsched-run-") as folder:
        storage = imaging.ContainerStorage(Path(folder)).prepare()
        try:
            yield storage
        finally:
            # Unmounts and deletes every layer, so the folder can go.
            storage.run("podman", "rmi", "--all", "--force", check=False)


def test_the_registry_serves_the_built_image(
    built: tuple[imaging.ContainerStorage, imaging.BuiltImage], pushed: Pushed
) -> None:
    """The pushed manifest is the registry's own (its digest is the one the chart is given); its config,
    which names every layer by the digest of its content, is the built image's."""
    _storage, image = built
    host, name = pushed.repository.split("/", 1)
    request = urllib.request.Request(
        f"http://{host}/v2/{name}/manifests/{pushed.digest}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Docker-Content-Digest"] == pushed.digest
        manifest = json.loads(response.read())
    assert manifest["config"]["digest"] == image.config_digest


def test_the_image_installs_exactly_the_hash_lock(
    built: tuple[imaging.ContainerStorage, imaging.BuiltImage],
) -> None:
    storage, image = built
    listing = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.name: d.version for d in m.distributions()}))"
    )
    result = storage.run(
        "podman", "run", "--rm", "--network=none", "--entrypoint=python", image.reference, "-c", listing
    )
    installed = {normalized(name): version for name, version in json.loads(result.stdout).items()}
    locked = {name: pin.version for name, pin in lock_pins(REPO / "requirements" / "runtime.txt").items()}

    assert installed.pop("promsched") == image.tagged.rsplit(":", 1)[1]
    assert installed == locked
    no_pip = storage.run(
        "podman",
        "run",
        "--rm",
        "--network=none",
        "--entrypoint=python",
        image.reference,
        "-c",
        "import importlib.util as u; print(u.find_spec('pip') is None)",
    )
    assert no_pip.stdout.strip() == "True", "pip must not ship in the image's environment"


# --- the chart's Deployment, run by podman ---------------------------------------------------------


@dataclass
class Release:
    name: str
    namespace: str
    deployment: dict[str, Any]


def _kubectl_json(sandbox: Sandbox, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(sandbox.kubectl(*args, "-o", "json").stdout)
    return found


@pytest.fixture
def release(sandbox: Sandbox, pushed: Pushed, tmp_path: Path) -> Iterator[Release]:
    name, namespace = f"image-{_suffix()}", f"image-{_suffix()}"
    sandbox.kubectl("create", "namespace", namespace)
    prometheus_host = urllib.parse.urlsplit(sandbox.prometheus_url).hostname
    values = {
        "image": {"repository": pushed.repository, "tag": pushed.tag, "digest": pushed.digest},
        "prometheus": {"allowedHosts": [prometheus_host]},
        "leaderElection": {"enabled": True},
        "serviceMonitor": {"enabled": False},
        "port": free_port(),
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    helm = [sandbox.binary("helm"), "--kubeconfig", str(sandbox.kubeconfig)]
    installed = subprocess.run(
        [*helm, "install", name, str(CHART), "-n", namespace, "-f", str(values_file)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    try:
        assert installed.returncode == 0, installed.stderr
        # The Deployment as the API server keeps it, its defaults (the grace period...) filled in.
        deployment = _kubectl_json(
            sandbox, "get", "deployment", "-n", namespace, "-l", f"app.kubernetes.io/instance={name}"
        )["items"][0]
        yield Release(name, namespace, deployment)
    finally:
        subprocess.run(
            [*helm, "uninstall", name, "-n", namespace, "--wait"],
            capture_output=True,
            timeout=300,
            check=False,
        )
        sandbox.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--timeout=180s")


def _lease_holder(sandbox: Sandbox, namespace: str, name: str) -> str:
    """The Lease's holderIdentity; "" while it has none, or while the Lease does not exist yet."""
    found = sandbox.kubectl("get", "lease", name, "-n", namespace, "-o", "json", "--ignore-not-found").stdout
    return str(((json.loads(found) if found.strip() else {}).get("spec") or {}).get("holderIdentity") or "")


def _answers(url: str, timeout: float) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return 0


def _probe_url(container: dict[str, Any], probe: dict[str, Any]) -> str:
    get = probe["httpGet"]
    return f"http://127.0.0.1:{port_number(container, get['port'])}{get['path']}"


def test_the_charts_deployment_runs_the_image_from_the_registry(
    sandbox: Sandbox,
    release: Release,
    run_storage: imaging.ContainerStorage,
    tmp_path: Path,
) -> None:
    others = [
        p.name
        for p in Supervisor(sandbox.directory).recorded()
        if p.name.startswith("promsched") and p.alive()
    ]
    assert others == [], f"promsched operator(s) {others} would place this test's pods too"
    template = release.deployment["spec"]["template"]
    pod, container = template["spec"], template["spec"]["containers"][0]
    args = container["args"]
    lease_name = next(a for a in args if a.startswith("--lease-name=")).split("=", 1)[1]
    lease_namespace = next(a for a in args if a.startswith("--lease-namespace=")).split("=", 1)[1]
    token = sandbox.kubectl(
        "create", "token", pod["serviceAccountName"], "-n", release.namespace, "--duration=1h"
    ).stdout.strip()
    kubeconfig = yaml.safe_load(sandbox.kubeconfig.read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    server = urllib.parse.urlsplit(cluster["server"])
    assert server.hostname
    assert server.port
    files = write_service_account_files(
        tmp_path / "serviceaccount",
        token,
        Path(cluster["certificate-authority"]).read_bytes(),
        release.namespace,
    )
    pod_name = f"{release.deployment['metadata']['name']}-podman-{_suffix()}"
    identity = PodIdentity(pod_name, files, server.hostname, server.port)
    arguments = podman_run_arguments(pod, container["image"], identity)
    # The kubelet's pull of an image by digest, from a registry served over plain HTTP.
    run_storage.run("podman", "pull", "--tls-verify=false", container["image"], timeout=600)
    run_storage.run("podman", "run", *arguments)

    work, policy = f"image-work-{_suffix()}", f"image-{_suffix()}"
    try:
        # The startup probe's budget, then liveness and readiness, as the kubelet would probe them.
        startup = container["startupProbe"]
        budget = (
            startup.get("initialDelaySeconds", 0) + startup["periodSeconds"] * startup["failureThreshold"]
        )
        for probe in (container["startupProbe"], container["livenessProbe"], container["readinessProbe"]):
            url, timeout = _probe_url(container, probe), probe["timeoutSeconds"]
            eventually(
                lambda: _answers(url, timeout),  # noqa: B023 (called before the loop moves on)
                lambda code: code == 200,
                timeout=budget,
                what=url,
            )

        holder = eventually(
            lambda: _lease_holder(sandbox, lease_namespace, lease_name),
            lambda found: found.startswith(f"{pod_name}-"),
            timeout=budget,
            what=f"Lease {lease_namespace}/{lease_name} held by {pod_name}",
        )

        sandbox.kubectl("create", "namespace", work)
        eventually(
            lambda: sandbox.kubectl("get", "serviceaccount", "default", "-n", work, check=False).returncode,
            lambda code: code == 0,
            what="the work namespace's default ServiceAccount",
        )
        sandbox.kubectl(
            "apply", "-f", "-", input=json.dumps(policy_manifest(policy, policy, sandbox.prometheus_url))
        )
        sandbox.kubectl("apply", "-f", "-", input=json.dumps(pod_manifest("placed", work, policy)))
        node = eventually(
            lambda: _kubectl_json(sandbox, "get", "pod", "placed", "-n", work)["spec"].get("nodeName"),
            bool,
            timeout=PLACED_WITHIN,
            what="pod placed bound by the image's operator",
        )
        assert node in sandbox.node_names
        status = eventually(
            lambda: _kubectl_json(sandbox, "get", "schedulingpolicy", policy).get("status") or {},
            lambda s: s.get("scheduled", 0) >= 1,
            timeout=PLACED_WITHIN,
            what=f"policy {policy}'s status counting the placed pod",
        )
        ready = {c["type"]: c for c in status.get("conditions") or []}["Ready"]
        assert ready["status"] == "True", ready

        # The kubelet's stop: SIGTERM, then SIGKILL once the grace period is over. Exit code 0 means the
        # operator ended by itself, in time (a kill would be 137).
        grace = pod["terminationGracePeriodSeconds"]
        run_storage.run("podman", "stop", f"--time={grace}", pod_name, timeout=grace + 60)
        state = json.loads(run_storage.run("podman", "inspect", "--format=json", pod_name).stdout)[0]["State"]
        assert state["ExitCode"] == 0
        assert _lease_holder(sandbox, lease_namespace, lease_name) == "", (
            "a leaving leader releases its Lease"
        )
        assert holder.startswith(f"{pod_name}-")
    finally:
        # The operator's log, shown by pytest when the test fails.
        logged = run_storage.run("podman", "logs", pod_name, check=False)
        print(logged.stdout + logged.stderr)
        run_storage.run("podman", "rm", "--force", pod_name, check=False)
        sandbox.kubectl("delete", "schedulingpolicy", policy, "--ignore-not-found")
        sandbox.kubectl("delete", "namespace", work, "--ignore-not-found", "--timeout=180s")
