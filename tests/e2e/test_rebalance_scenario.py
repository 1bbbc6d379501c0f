"""spec.rebalance on the sandbox: a node made hot for real (its simulated load, plus the pod's own usage
in the closed-loop exporter), read from Prometheus over the whole sustainedFor window; evictions through
the Eviction API, with a real PodDisruptionBudget and a real ReplicaSet replacing the moved pod.

One scenario, step by step, because each step waits for the window to fill: a node hot for less than
sustainedFor moves nothing; no destination under the target moves nothing; DryRun reports and moves
nothing; a PodDisruptionBudget blocks Enforce; without it the pod moves to a cool node, with an Event.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from promsched.sandbox.control_plane.clusters import Sandbox
from support.clusters import Cluster
from support.polling import eventually

pytestmark = pytest.mark.e2e

HOT_NODE = "node-4"  # 65% cpu in tests/fixtures/profiles.yaml; with the pod's 500m of 4 cores, 77.5%
WINDOW_TIMEOUT = 240.0  # the plugin's 1m rate, then 1m sustained, with scrapes and cycles on top


def rebalance(mode: str, target: float) -> dict[str, Any]:
    return {
        "mode": mode,
        "interval": "10s",
        "sustainedFor": "1m",
        "thresholds": [{"plugin": "cpu", "hotThreshold": 85, "targetThreshold": target}],
        "pods": {"minPodAge": "0s"},
    }


def apply_policy(cluster: Cluster, mode: str, target: float, name: str | None = None) -> str:
    document = {
        "apiVersion": "promsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name or f"{cluster.scheduler_name}-0"},
        "spec": {
            "schedulerName": cluster.scheduler_name,
            "prometheus": {"url": cluster.sandbox.prometheus_url, "timeout": "5s"},
            "refreshInterval": "2s",
            "staleAfter": "1m",
            "plugins": [{"name": "cpu", "timeRange": "1m"}],
            "rebalance": rebalance(mode, target),
        },
    }
    cluster.apply(document)
    if document["metadata"]["name"] not in cluster.policies:
        cluster.policies.append(document["metadata"]["name"])
    return str(document["metadata"]["name"])


def web_pod(cluster: Cluster) -> dict[str, Any]:
    """The pod to move: bound by hand to the hot node, adopted by a ReplicaSet that replaces it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-0",
            "namespace": cluster.namespace,
            "labels": {"app": "web"},
            "annotations": {"sandbox.promsched.io/usage": "cpu=500m"},
        },
        "spec": {
            "nodeName": HOT_NODE,
            "schedulerName": cluster.scheduler_name,
            "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }


def replica_set(cluster: Cluster) -> dict[str, Any]:
    pod = web_pod(cluster)
    spec = {key: value for key, value in pod["spec"].items() if key != "nodeName"}
    template = {
        "metadata": {"labels": {"app": "web"}, "annotations": pod["metadata"]["annotations"]},
        "spec": spec,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": cluster.namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": template},
    }


def rebalance_status(cluster: Cluster, policy: str) -> dict[str, Any]:
    status: dict[str, Any] = cluster.status(policy).get("rebalance") or {}
    return status


def pods_by_name(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {pod["metadata"]["name"]: pod for pod in cluster.pods()}


def test_a_node_hot_for_sustained_for_sheds_a_pod_to_a_cool_node_within_its_budget(
    cluster: Cluster, sandbox: Sandbox
) -> None:
    cluster.apply(web_pod(cluster))
    cluster.apply(replica_set(cluster))
    eventually(
        lambda: pods_by_name(cluster)["web-0"]["metadata"].get("ownerReferences"),
        bool,
        what="the ReplicaSet adopting web-0",
    )
    before = sandbox.profiles()[HOT_NODE]
    sandbox.set_load(HOT_NODE, cpu=95)
    try:
        # Target 5: every node is past it, so no move has a destination.
        policy = apply_policy(cluster, "Enforce", 5)
        first = eventually(
            lambda: rebalance_status(cluster, policy),
            lambda status: "lastCycle" in status,
            what="a first cycle",
        )
        # The node has been hot for seconds, not for the whole minute: nothing is hot yet.
        assert first["hotNodeCount"] == 0, first
        blocked = eventually(
            lambda: rebalance_status(cluster, policy),
            # Another node may be hot too for a while: the previous tests' pods (node-0's preemption
            # victims) stay in Prometheus's window after they are gone.
            lambda status: (
                HOT_NODE in [entry["node"] for entry in status.get("hotNodes", [])] and status.get("blocked")
            ),
            timeout=WINDOW_TIMEOUT,
            what=f"{HOT_NODE} hot for 1m",
        )
        assert HOT_NODE in [entry["node"] for entry in blocked["hotNodes"]]
        assert any("past the target 5%" in entry["reason"] for entry in blocked["blocked"]), blocked
        assert "web-0" in pods_by_name(cluster)

        apply_policy(cluster, "DryRun", 70, policy)
        dry = eventually(
            lambda: rebalance_status(cluster, policy),
            lambda status: status.get("mode") == "DryRun" and status.get("moves"),
            what="DryRun reporting the move",
        )
        [move] = dry["moves"]
        assert (move["pod"], move["node"]) == (f"{cluster.namespace}/web-0", HOT_NODE)
        assert move["destination"] != HOT_NODE
        assert "web-0" in pods_by_name(cluster)

        cluster.apply(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": cluster.namespace},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            }
        )
        cluster.budget_allowing("web", 0)
        apply_policy(cluster, "Enforce", 70, policy)
        refused = eventually(
            lambda: rebalance_status(cluster, policy),
            lambda status: any(
                "PodDisruptionBudget" in entry["reason"] for entry in status.get("blocked", [])
            ),
            what="the budget refusing the eviction",
        )
        assert refused["evictions"] == 0
        assert "web-0" in pods_by_name(cluster)

        sandbox.kubectl("delete", "pdb", "web", "-n", cluster.namespace)
        replaced = eventually(
            lambda: pods_by_name(cluster),
            lambda pods: "web-0" not in pods and any(pod["spec"].get("nodeName") for pod in pods.values()),
            what="web-0 evicted and its replacement bound",
        )
        [replacement] = replaced.values()
        assert replacement["spec"]["nodeName"] != HOT_NODE
        events = [
            event
            for event in json.loads(
                sandbox.kubectl("get", "events", "-n", cluster.namespace, "-o", "json").stdout
            )["items"]
            if event.get("reason") == "Rebalanced"
        ]
        assert [event["involvedObject"]["name"] for event in events] == ["web-0"]
        assert events[0]["message"].startswith(f"Evicted by promsched: {HOT_NODE} cpu ")
        # The status is written at most once a second, behind bindings: it may trail the Event.
        recorded = eventually(
            lambda: rebalance_status(cluster, policy),
            lambda status: status.get("evictions", 0) > 0,
            what="the eviction in status.rebalance",
        )
        assert recorded["evictions"] == 1
    finally:
        sandbox.set_load(HOT_NODE, cpu=before["cpu"])
