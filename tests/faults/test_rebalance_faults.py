"""Rebalancing goes on after failures in the middle of a cycle (issue 38): an eviction whose connection
is refused (the API server unreachable through a cut proxy), then one whose token cannot be renewed
(the exec credential plugin failing). Each is a blocked move; once the faults are mended, the next
cycle evicts the pod and its ReplicaSet replaces it on a cool node.

A PodDisruptionBudget holds the eviction back until each fault is in place: rebalancing must already be
trying (and being refused) when the API server becomes unreachable.
"""

from __future__ import annotations

import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor
from support.clusters import Cluster, Operator
from support.polling import eventually
from support.proxies import StallingProxy

pytestmark = pytest.mark.faults

HOT_NODE = "node-4"  # 65% cpu in tests/fixtures/profiles.yaml, made 95% below
WINDOW_TIMEOUT = 240.0  # the plugin's 1m rate, then 1m sustained, with scrapes and cycles on top
SERVICE_ACCOUNT = "promsched-faults"
# An exec credential plugin: the service account's token, valid for 11 s (renewed 10 s before it
# expires, so about every request), or a failure while the file `broken` exists.
PLUGIN = """
import datetime, json, pathlib, sys
here = pathlib.Path(__file__).parent
if (here / "broken").exists():
    with (here / "failures").open("a") as failures:
        failures.write("failed\\n")
    sys.exit("the identity provider is unreachable")
expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=11)
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {"token": (here / "token").read_text().strip(), "expirationTimestamp": expiry.isoformat()},
}))
"""


@dataclass
class Credentials:
    """The exec plugin's folder: `break_()` makes every renewal fail until `mend()`."""

    folder: Path

    def break_(self) -> None:
        (self.folder / "broken").touch()

    def mend(self) -> None:
        (self.folder / "broken").unlink()

    def failures(self) -> int:
        path = self.folder / "failures"
        return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture
def credentials(sandbox: Sandbox, cluster: Cluster, tmp_path: Path) -> Iterator[Credentials]:
    """A ServiceAccount with cluster-admin, its token handed out by the exec plugin."""
    binding = f"{cluster.namespace}-{SERVICE_ACCOUNT}"
    sandbox.kubectl("create", "serviceaccount", SERVICE_ACCOUNT, "-n", cluster.namespace)
    sandbox.kubectl(
        "create",
        "clusterrolebinding",
        binding,
        "--clusterrole=cluster-admin",
        f"--serviceaccount={cluster.namespace}:{SERVICE_ACCOUNT}",
    )
    token = sandbox.kubectl("create", "token", SERVICE_ACCOUNT, "-n", cluster.namespace, "--duration=2h")
    (tmp_path / "token").write_text(token.stdout.strip())
    (tmp_path / "plugin.py").write_text(PLUGIN)
    try:
        yield Credentials(tmp_path)
    finally:
        sandbox.kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")


@pytest.fixture
def faulty_operator(
    sandbox: Sandbox, operator: Operator, credentials: Credentials, proxy: StallingProxy
) -> Iterator[Operator]:
    """The operator, alone, reaching the API server through `proxy` with the exec plugin's token."""
    kubeconfig = yaml.safe_load(sandbox.kubeconfig.read_text())
    kubeconfig["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    [user] = kubeconfig["users"]
    user["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(credentials.folder / "plugin.py")],
            "interactiveMode": "Never",
        }
    }
    path = credentials.folder / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    operator.stop()
    running = Operator(sandbox, "promsched-rebalance-faults", ("--kubeconfig", str(path)))
    try:
        yield running.start()
    finally:
        running.stop()
        operator.start()


def web(cluster: Cluster) -> list[dict[str, Any]]:
    """web-0, bound by hand to the hot node and using 500m there, its ReplicaSet, and a budget that
    allows no disruption."""
    labels = {"app": "web"}
    annotations = {"sandbox.promsched.io/usage": "cpu=500m"}
    spec = {
        "schedulerName": cluster.scheduler_name,
        "containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1"}}}
        ],
    }
    metadata = {"namespace": cluster.namespace, "labels": labels, "annotations": annotations}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-0", **metadata},
            "spec": {"nodeName": HOT_NODE, **spec},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": cluster.namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec},
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": cluster.namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
        },
    ]


def rebalancing_policy(cluster: Cluster) -> str:
    return cluster.policy(
        [{"name": "cpu", "timeRange": "1m"}],
        rebalance={
            "mode": "Enforce",
            "interval": "10s",
            "sustainedFor": "1m",
            "thresholds": [{"plugin": "cpu", "hotThreshold": 85, "targetThreshold": 70}],
            "pods": {"minPodAge": "0s"},
        },
    )


def failed_evictions(operator: Operator) -> float:
    """promsched_rebalance_blocked_total{reason="EvictionFailed"} on the operator's /metrics."""
    with urllib.request.urlopen(f"{operator.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "promsched_rebalance_blocked_total" and sample.labels["reason"] == "EvictionFailed"
    )


def operator_log(sandbox: Sandbox, operator: Operator) -> str:
    return (Supervisor(sandbox.directory).logs / f"{operator.name}.log").read_text(errors="replace")


def test_rebalancing_goes_on_after_an_eviction_and_a_token_renewal_fail_mid_cycle(
    sandbox: Sandbox,
    cluster: Cluster,
    proxy: StallingProxy,
    credentials: Credentials,
    faulty_operator: Operator,
) -> None:
    pod, replica_set, budget = web(cluster)
    cluster.apply(pod)
    cluster.apply(replica_set)
    cluster.apply(budget)
    cluster.budget_allowing("web", 0)
    before = sandbox.profiles()[HOT_NODE]
    sandbox.set_load(HOT_NODE, cpu=95)
    try:
        policy = rebalancing_policy(cluster)
        eventually(
            lambda: cluster.status(policy).get("rebalance") or {},
            lambda status: any(
                "PodDisruptionBudget" in entry["reason"] for entry in status.get("blocked", [])
            ),
            timeout=WINDOW_TIMEOUT,
            what=f"{HOT_NODE} hot for 1m and the budget refusing web-0's eviction",
        )

        # The API server unreachable: the next eviction's connection is refused.
        refused = failed_evictions(faulty_operator)
        proxy.cut()
        sandbox.kubectl("delete", "pdb", "web", "-n", cluster.namespace)
        eventually(
            lambda: failed_evictions(faulty_operator),
            lambda count: count > refused,
            what="an eviction failing on the cut connection",
        )

        # Reachable again, but the token cannot be renewed: the next eviction is never sent.
        credentials.break_()
        proxy.mend()
        eventually(
            lambda: operator_log(sandbox, faulty_operator),
            lambda log: f"evicting {cluster.namespace}/web-0 failed: RenewalError(" in log,
            what="an eviction failing on the token's renewal",
        )
        assert credentials.failures() > 0
        assert "web-0" in [item["metadata"]["name"] for item in cluster.pods()]

        credentials.mend()
        replaced = eventually(
            lambda: {item["metadata"]["name"]: item for item in cluster.pods()},
            lambda pods: "web-0" not in pods and any(item["spec"].get("nodeName") for item in pods.values()),
            timeout=120,
            what="web-0 evicted once the faults are mended, and its replacement bound",
        )
        [replacement] = replaced.values()
        assert replacement["spec"]["nodeName"] != HOT_NODE
        eventually(
            lambda: [event["reason"] for event in cluster.events("web-0")],
            lambda reasons: reasons.count("Rebalanced") == 1,
            what="web-0's Rebalanced event",
        )
    finally:
        sandbox.set_load(HOT_NODE, cpu=before["cpu"])
