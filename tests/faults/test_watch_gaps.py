"""A watch gap (issue 16): the operator is cut off from the API server while a pod it bound and a node
are deleted, and the API server restarts, so its watches' resourceVersions expire (410 Gone). Kopf then
lists again and replays only what still exists; only the operator's own list learns of the deletions.
As kube-scheduler's informers would, the operator must stop counting the pod and stop offering the node.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor
from promsched.sandbox.launching import node_manifest
from promsched.sandbox.node_metrics.profiles import LoadProfile, NodeSetup
from support.clusters import Cluster, Operator
from support.invariants import violations
from support.polling import eventually
from support.proxies import StallingProxy

pytestmark = pytest.mark.faults

CPU = [{"name": "cpu", "weight": 1, "timeRange": "1m"}]
GAP_KEY = "promsched.io/e2e-gap"


def drift(operator: Operator) -> dict[str, float]:
    """promsched_cache_drift_total by kind, as the operator serves it."""
    with urllib.request.urlopen(f"{operator.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        sample.labels["kind"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "promsched_cache_drift"
        for sample in family.samples
        if sample.name == "promsched_cache_drift_total"
    }


def ready_without_taints(sandbox: Sandbox, names: list[str]) -> bool:
    nodes = json.loads(sandbox.kubectl("get", "nodes", *names, "-o", "json").stdout)["items"]
    return len(nodes) == len(names) and all(
        any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))
        and not [t for t in node["spec"].get("taints", []) if t["key"].startswith("node.kubernetes.io/")]
        for node in nodes
    )


@pytest.fixture
def through_proxy(
    sandbox: Sandbox, operator: Operator, proxy: StallingProxy, tmp_path: Path
) -> Iterator[Operator]:
    """The operator, alone, reaching the API server through `proxy`. No periodic safety net: only the
    lists that follow Kopf's own (after 410 Gone) may find what a watch gap hid."""
    kubeconfig = yaml.safe_load(sandbox.kubeconfig.read_text())
    kubeconfig["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    proxied = tmp_path / "kubeconfig"
    proxied.write_text(yaml.safe_dump(kubeconfig))
    operator.stop()
    running = Operator(sandbox, "promsched-gap", ("--kubeconfig", str(proxied), "--resync-interval", "0"))
    try:
        yield running.start()
    finally:
        running.stop()
        operator.start()


@pytest.fixture
def gap_nodes(sandbox: Sandbox, cluster: Cluster, through_proxy: Operator) -> Iterator[list[str]]:
    """Two kwok nodes of this test's own, tainted and labelled so that only its pods go there: a
    small one (1 CPU) and a large one (3.9 CPUs). Made once the operator runs, so that the lists it
    makes after Kopf's own at start-up are long over when the test cuts it off."""
    names = [f"{cluster.namespace}-small", f"{cluster.namespace}-large"]
    taint = {"key": GAP_KEY, "value": cluster.namespace, "effect": "NoSchedule"}
    manifests = []
    for index, name in enumerate(names):
        manifest: dict[str, Any] = node_manifest(
            name, 200 + index, NodeSetup(LoadProfile(), {GAP_KEY: cluster.namespace}, [taint])
        )
        if index == 0:
            manifest["status"]["allocatable"]["cpu"] = "1"
        manifests.append(manifest)
    listed = {"apiVersion": "v1", "kind": "List", "items": manifests}
    sandbox.kubectl("create", "-f", "-", input=json.dumps(listed))
    try:
        eventually(lambda: ready_without_taints(sandbox, names), bool, what="the test's nodes Ready")
        yield names
    finally:
        # Its pods first: pods left on a deleted node wait for the pod garbage collector.
        sandbox.kubectl("delete", "pods", "--all", "-n", cluster.namespace, "--force", "--grace-period=0")
        sandbox.kubectl("delete", "nodes", *names, "--ignore-not-found")


def test_deletions_during_a_watch_gap_free_the_pods_room_and_drop_the_node(
    sandbox: Sandbox, cluster: Cluster, proxy: StallingProxy, through_proxy: Operator, gap_nodes: list[str]
) -> None:
    small, large = gap_nodes
    cluster.policy(CPU)
    toleration = {"key": GAP_KEY, "operator": "Equal", "value": cluster.namespace, "effect": "NoSchedule"}
    on_gap_nodes = {"nodeSelector": {GAP_KEY: cluster.namespace}, "tolerations": [toleration]}
    on_small = {**on_gap_nodes, "nodeSelector": {"kubernetes.io/hostname": small}}
    cluster.pod("holder", cpu="800m", **on_small)
    eventually(cluster.node_of, lambda placed: placed.get("holder") == small, what="holder bound")
    cluster.pod("waiting", cpu="800m", **on_small)
    told = eventually(
        lambda: [e["message"] for e in cluster.events("waiting") if e["reason"] == "FailedScheduling"],
        bool,
        what="waiting told it does not fit",
    )
    assert "Insufficient cpu" in told[-1]
    before = drift(through_proxy)

    proxy.cut()
    sandbox.kubectl("delete", "pod", "holder", "-n", cluster.namespace, "--force", "--grace-period=0")
    sandbox.kubectl("delete", "node", large)
    Supervisor(sandbox.directory).restart("kube-apiserver")
    eventually(
        lambda: sandbox.kubectl("get", "--raw", "/readyz", check=False).returncode,
        lambda code: code == 0,
        what="the API server back",
    )
    proxy.mend()

    # The watches resume from resourceVersions the restarted API server no longer serves (410 Gone):
    # what the operator's own lists find then is what no event told, so it counts as drift.
    eventually(
        lambda: drift(through_proxy),
        lambda now: all(now.get(kind, 0.0) > before.get(kind, 0.0) for kind in ("pods", "nodes")),
        timeout=120,
        what="the deleted pod and node found missing by a list",
    )
    eventually(cluster.node_of, lambda placed: placed.get("waiting") == small, what="waiting bound")
    names = [f"after-{index}" for index in range(4)]
    for name in names:
        cluster.pod(name, cpu="50m", **on_gap_nodes)
    placed = eventually(
        cluster.node_of, lambda now: all(now.get(name) for name in names), what="the later pods bound"
    )
    assert {placed[name] for name in names} == {small}
    assert violations(sandbox, {cluster.scheduler_name}, through_proxy.url) == []
