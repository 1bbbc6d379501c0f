"""The sandbox is made of real components that behave as a cluster and a monitoring stack do."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from promsched.sandbox import launching
from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor
from promsched.sandbox.node_metrics.profiles import load_profiles_file
from support.polling import eventually

pytestmark = pytest.mark.integration
FIXTURES = Path(__file__).parents[1] / "fixtures"
# Simulated counters are exact; the tolerance covers float formatting and a window mid-change.
TOLERANCE_PERCENT = 0.5


def query_by_node(sandbox: Sandbox, promql: str, at: float | None = None) -> dict[str, float]:
    form = {"query": promql} if at is None else {"query": promql, "time": f"{at:.3f}"}
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(f"{sandbox.prometheus_url}/api/v1/query", data=data, timeout=10) as response:
        result = json.load(response)["data"]["result"]
    return {r["metric"]["instance"].removesuffix(":9100"): float(r["value"][1]) for r in result}


CPU_BUSY = '100 * (1 - avg by (instance) (rate(node_cpu_seconds_total{job="sandbox-nodes",mode="idle"}[%s])))'
MEMORY_USED = '100 * (1 - node_memory_MemAvailable_bytes{job="sandbox-nodes"} / node_memory_MemTotal_bytes)'


def test_every_node_is_ready_and_looks_real(sandbox: Sandbox) -> None:
    nodes = json.loads(sandbox.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(sandbox.node_names)
    for node in nodes:
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["Ready"] == "True"
        assert node["status"]["allocatable"]["cpu"] == "3900m"
        assert node["metadata"]["labels"]["topology.kubernetes.io/zone"].startswith("zone-")
        assert not node["spec"].get("taints")


def test_version_reports_the_pinned_release(sandbox: Sandbox) -> None:
    version = json.loads(sandbox.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == "v1.37.2"


def test_service_account_tokens_are_issued(sandbox: Sandbox) -> None:
    token = sandbox.kubectl("create", "token", "default", "-n", "default").stdout.strip()
    assert token.count(".") == 2


def test_deployments_create_pods_and_a_bound_pod_runs(sandbox: Sandbox) -> None:
    namespace = "sandbox-test"
    sandbox.kubectl("create", "namespace", namespace)
    try:
        sandbox.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2", "-n", namespace)
        eventually(
            lambda: len(
                json.loads(sandbox.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
            ),
            lambda count: count == 2,
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "bound", "namespace": namespace},
            "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "nginx"}]},
        }
        sandbox.kubectl("create", "-f", "-", input=json.dumps(pod))
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "bound", "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": sandbox.node_names[1]},
        }
        sandbox.kubectl(
            "create",
            "--raw",
            f"/api/v1/namespaces/{namespace}/pods/bound/binding",
            "-f",
            "-",
            input=json.dumps(binding),
        )
        phase = eventually(
            lambda: (
                sandbox.kubectl(
                    "get", "pod", "bound", "-n", namespace, "-o", "jsonpath={.status.phase}"
                ).stdout
            ),
            lambda value: value == "Running",
        )
        assert phase == "Running"
        node = sandbox.kubectl(
            "get", "pod", "bound", "-n", namespace, "-o", "jsonpath={.spec.nodeName}"
        ).stdout
        assert node == sandbox.node_names[1]
    finally:
        sandbox.kubectl("delete", "namespace", namespace, "--wait=false")


def test_prometheus_reads_back_each_nodes_profile(sandbox: Sandbox) -> None:
    # Read as of the moment the sandbox was ready: other tests change loads later, and a window that
    # spans a change mixes the two profiles.
    at = sandbox.state.ready_at
    profiles = load_profiles_file(FIXTURES / "profiles.yaml", sandbox.node_names)
    for window in ("1m", "60m"):
        cpu = query_by_node(sandbox, CPU_BUSY % window, at)
        for node in sandbox.node_names:
            assert cpu[node] == pytest.approx(profiles[node].load.cpu, abs=TOLERANCE_PERCENT), (node, window)
    memory = query_by_node(sandbox, MEMORY_USED, at)
    for node in sandbox.node_names:
        assert memory[node] == pytest.approx(profiles[node].load.memory, abs=TOLERANCE_PERCENT), node


def test_a_changed_profile_shows_in_prometheus(sandbox: Sandbox) -> None:
    node = sandbox.node_names[2]
    before = sandbox.profiles()[node]
    sandbox.set_load(node, cpu=95, memory=12)
    try:
        eventually(
            lambda: query_by_node(sandbox, MEMORY_USED)[node], lambda v: abs(v - 12) < TOLERANCE_PERCENT
        )
        eventually(
            lambda: query_by_node(sandbox, CPU_BUSY % "10s")[node], lambda v: abs(v - 95) < TOLERANCE_PERCENT
        )
    finally:
        sandbox.set_load(node, cpu=before["cpu"], memory=before["memory"])


def test_the_real_node_exporter_is_scraped(sandbox: Sandbox) -> None:
    up = query_by_node(sandbox, 'up{job="node-exporter"}')
    assert list(up.values()) == [1.0]


def test_the_cli_refuses_a_second_up_and_down_leaves_no_process(tmp_path: Path) -> None:
    """`up` and `down` run as separate CLI processes, as a user (or a crashed launcher) leaves them."""

    def promsched(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "promsched.cli", "sandbox", *args, "--dir", str(tmp_path)]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)

    started = promsched("up", "--nodes", "1", "--history-minutes", "0")
    assert started.returncode == 0, started.stderr
    assert f"export KUBECONFIG={tmp_path}/kubeconfig" in started.stdout
    processes = Supervisor(tmp_path).recorded()
    try:
        assert {p.name for p in processes} == set(launching.COMPONENTS)
        assert all(p.alive() for p in processes)
        again = promsched("up", "--nodes", "1")
        assert again.returncode == 1
        assert "a sandbox is already up in" in again.stderr
        status = promsched("status")
        assert status.returncode == 0
        assert status.stdout.count("running") == len(launching.COMPONENTS)
    finally:
        stopped = promsched("down")
    assert stopped.returncode == 0
    assert [p.name for p in processes if p.alive()] == []
    assert not (tmp_path / "sandbox.json").exists()
    assert promsched("status").returncode == 1
