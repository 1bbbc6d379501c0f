"""Faults on the sandbox: each case ends by checking that nothing was lost, bound twice or overcommitted.

Components are stopped and restarted for real (`Supervisor.restart` starts the same command again).
This tier runs last (see tests/conftest.py): it leaves gaps in the shared Prometheus' history.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor, free_port
from support.clusters import Cluster, Operator
from support.invariants import violations
from support.polling import eventually
from support.proxies import StallingProxy

pytestmark = pytest.mark.faults

CPU = [{"name": "cpu", "weight": 1, "timeRange": "1m"}]


def bound(cluster: Cluster) -> dict[str, str]:
    return {name: node for name, node in cluster.node_of().items() if node}


def burst(cluster: Cluster, count: int, prefix: str = "burst", **spec: Any) -> list[str]:
    names = [f"{prefix}-{index}" for index in range(count)]
    items = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": cluster.namespace},
            "spec": {
                "schedulerName": cluster.scheduler_name,
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                    }
                ],
                **spec,
            },
        }
        for name in names
    ]
    cluster.sandbox.kubectl(
        "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    return names


def conditions(cluster: Cluster, policy: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in cluster.status(policy).get("conditions", [])}


def probe(operator: Operator, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"{operator.url}/{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def snapshot_age(operator: Operator, policy: str) -> float:
    """promsched_policy_snapshot_age_seconds of `policy` on the operator's /metrics (-1: none yet)."""
    _status, text = probe(operator, "metrics")
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "promsched_policy_snapshot_age_seconds" and sample.labels["policy"] == policy:
                return float(sample.value)
    return -1.0


def assert_invariants(cluster: Cluster, operator: Operator) -> None:
    assert violations(cluster.sandbox, {cluster.scheduler_name}, operator.url) == []


def test_prometheus_stopped_during_a_burst(sandbox: Sandbox, operator: Operator, cluster: Cluster) -> None:
    policy = cluster.policy(CPU, staleAfter="5s", onMissingMetrics="Neutral")
    eventually(lambda: conditions(cluster, policy).get("Ready", {}).get("status"), lambda s: s == "True")
    supervisor = Supervisor(sandbox.directory)
    supervisor.stop("prometheus")
    try:
        names = burst(cluster, 30)
        # Neutral scores: every pod is still placed while Prometheus is down.
        eventually(lambda: bound(cluster), lambda b: set(b) == set(names), timeout=90, what="all placed")
        reachable = eventually(
            lambda: conditions(cluster, policy).get("PrometheusReachable", {}),
            lambda c: c.get("status") == "False",
            what="PrometheusReachable=False",
        )
        assert "cpu" in reachable["message"]
        ready = conditions(cluster, policy)["Ready"]
        assert ready["reason"] == "PrometheusUnavailable"
        assert "cannot reach Prometheus" in ready["message"]
        # The outage is the policy's, not the operator's: its snapshot goes stale, /readyz stays 200.
        eventually(
            lambda: snapshot_age(operator, policy), lambda age: age > 5, what="a snapshot past staleAfter"
        )
        assert probe(operator, "readyz") == (200, "ok\n")
    finally:
        supervisor.restart("prometheus")
    eventually(
        lambda: conditions(cluster, policy).get("PrometheusReachable", {}).get("status"),
        lambda s: s == "True",
        timeout=90,
        what="recovery once Prometheus is back",
    )
    assert_invariants(cluster, operator)


class FaultyPrometheus(http.server.ThreadingHTTPServer):
    """Answers every query slowly (past any sane timeout) or with garbage."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.release = threading.Event()
        super().__init__(("127.0.0.1", free_port()), self.Handler)

    class Handler(http.server.BaseHTTPRequestHandler):
        server: FaultyPrometheus

        def do_POST(self) -> None:
            if self.server.behaviour == "slow":
                self.server.release.wait(30)
            body = b"<html>this is not Prometheus</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass


@pytest.fixture(params=["slow", "garbage"])
def faulty_prometheus(request: pytest.FixtureRequest) -> Iterator[str]:
    server = FaultyPrometheus(request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


def test_a_slow_or_broken_prometheus_never_stalls_the_queue(
    operator: Operator, cluster: Cluster, faulty_prometheus: str
) -> None:
    policy = cluster.policy(CPU, prometheus={"url": faulty_prometheus, "timeout": "1s"})
    started = time.monotonic()
    names = burst(cluster, 20)
    eventually(lambda: bound(cluster), lambda b: set(b) == set(names), timeout=60, what="all placed")
    assert time.monotonic() - started < 30
    reachable = eventually(
        lambda: conditions(cluster, policy).get("PrometheusReachable", {}),
        lambda c: c.get("status") == "False",
        what="PrometheusReachable=False",
    )
    assert reachable["message"]
    assert_invariants(cluster, operator)


def test_the_api_server_restarted_during_a_burst(
    sandbox: Sandbox, operator: Operator, cluster: Cluster
) -> None:
    cluster.policy(CPU)
    names = burst(cluster, 60)
    eventually(lambda: len(bound(cluster)), lambda count: count >= 10, what="the burst under way")
    Supervisor(sandbox.directory).restart("kube-apiserver")
    eventually(
        lambda: sandbox.kubectl("get", "--raw", "/readyz", check=False).returncode,
        lambda code: code == 0,
        what="the API server back",
    )
    eventually(lambda: bound(cluster), lambda b: set(b) == set(names), timeout=120, what="all placed")
    assert_invariants(cluster, operator)


def test_the_operator_killed_during_a_burst(operator: Operator, cluster: Cluster) -> None:
    cluster.policy(CPU)
    names = burst(cluster, 80)
    eventually(lambda: len(bound(cluster)), lambda count: count >= 5, what="the burst under way")
    os.killpg(operator.pid(), signal.SIGKILL)
    # What it could not remove at exit (its kubeconfig's certificates as files) stays with the sandbox.
    left = operator.sandbox.directory / "tmp" / operator.name
    assert list(left.glob("promsched-credentials-*")), f"nothing left in {left}: TMPDIR not honoured?"
    operator.stop()
    operator.start()
    eventually(lambda: bound(cluster), lambda b: set(b) == set(names), timeout=120, what="all placed")
    assert_invariants(cluster, operator)


def test_pods_deleted_while_queued_or_bound_by_someone_else(
    sandbox: Sandbox, operator: Operator, cluster: Cluster
) -> None:
    cluster.policy(CPU)
    parked = burst(cluster, 5, prefix="parked", nodeSelector={"pool": "none"})
    eventually(
        lambda: [cluster.events(name) for name in parked],
        lambda events: all(events),
        what="parked pods told why",
    )
    sandbox.kubectl("delete", "pod", "-n", cluster.namespace, *parked[:3], "--wait=false")
    # Another scheduler binds a parked pod first: promsched must drop it, not bind it again.
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": parked[3]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-2"},
    }
    sandbox.kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/{cluster.namespace}/pods/{parked[3]}/binding",
        "-f",
        "-",
        input=json.dumps(binding),
    )
    names = burst(cluster, 10, prefix="after")
    eventually(lambda: bound(cluster), lambda b: set(names) <= set(b), what="later pods placed")
    assert bound(cluster)[parked[3]] == "node-2"
    assert not [e for e in cluster.events(parked[3]) if e["reason"] == "Scheduled"]
    assert_invariants(cluster, operator)


def test_pathological_pods_are_refused_without_blocking_others(operator: Operator, cluster: Cluster) -> None:
    cluster.policy(CPU)
    tolerations = [
        {"key": f"k{index}", "operator": "Exists", "effect": "NoSchedule"} for index in range(2000)
    ]
    cluster.pod("tolerant", tolerations=tolerations)
    terms = [
        {"matchExpressions": [{"key": f"label-{index}", "operator": "In", "values": [f"v{index}"]}]}
        for index in range(500)
    ]
    cluster.pod(
        "huge-affinity",
        affinity={
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        },
    )
    names = burst(cluster, 10, prefix="ordinary")
    eventually(lambda: bound(cluster), lambda b: {"tolerant", *names} <= set(b), what="ordinary pods placed")
    message = eventually(
        lambda: [e["message"] for e in cluster.events("huge-affinity") if e["reason"] == "FailedScheduling"],
        bool,
        what="FailedScheduling for the huge affinity",
    )
    assert "6 node(s) didn't match Pod's node affinity/selector" in message[-1]
    assert_invariants(cluster, operator)


def test_a_silently_stalled_watch_is_reopened(
    sandbox: Sandbox, operator: Operator, cluster: Cluster, tmp_path: Path
) -> None:
    inactivity = 10.0
    proxy = StallingProxy(("127.0.0.1", sandbox.state.ports["apiserver"]))
    kubeconfig = yaml.safe_load(sandbox.kubeconfig.read_text())
    kubeconfig["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    proxied = tmp_path / "kubeconfig"
    proxied.write_text(yaml.safe_dump(kubeconfig))
    cluster.policy(CPU)
    operator.stop()
    through_proxy = Operator(
        sandbox,
        "promsched-proxied",
        ("--kubeconfig", str(proxied), "--watch-inactivity-timeout", str(inactivity)),
    )
    try:
        through_proxy.start()
        cluster.pod("before")
        eventually(lambda: bound(cluster), lambda b: "before" in b, what="placed before the stall")
        proxy.stall()
        stalled_at = time.monotonic()
        cluster.pod("during")
        # Only a re-opened watch can see the new pod; the stalled bindings connection times out too.
        eventually(lambda: bound(cluster), lambda b: "during" in b, timeout=90, what="placed after the stall")
        recovered = time.monotonic() - stalled_at
        assert recovered < inactivity + 30, f"took {recovered:.0f}s"
        assert_invariants(cluster, through_proxy)
    finally:
        through_proxy.stop()
        proxy.close()
        operator.start()
