"""Placement rules honoured on the sandbox, side by side with the real kube-scheduler where it can run.

The sandbox's nodes node-0 .. node-5 are in zones zone-a, zone-b, zone-c, round robin (node-0 and node-3
in zone-a, node-1 and node-4 in zone-b, node-2 and node-5 in zone-c). Node loads come from
tests/fixtures/profiles.yaml: node-1 is the least loaded, node-0 the busiest.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from promsched.sandbox.control_plane.clusters import Sandbox
from support.clusters import Cluster
from support.differential import (
    CPU,
    HOSTNAME,
    ZONE,
    create,
    failed_scheduling,
    in_nodes,
    pod,
    without_preemption,
)
from support.polling import eventually
from support.preemption import found, preemption_note
from support.volume_manifests import claim_manifest, volume_manifest, waiting_class_manifest

pytestmark = pytest.mark.e2e

ZONES = {
    "node-0": "zone-a",
    "node-1": "zone-b",
    "node-2": "zone-c",
    "node-3": "zone-a",
    "node-4": "zone-b",
    "node-5": "zone-c",
}
# Every node scores the same: node_uname_info is 1 for each, on a 0..2 scale.
EQUAL_LOAD = [
    {
        "name": "same",
        "weight": 1,
        "timeRange": "0s",
        "query": 'max by (nodename) (node_uname_info{job="sandbox-nodes"})',
        "nodeLabel": "nodename",
        "normalization": {"type": "Absolute", "min": 0, "max": 2},
    }
]


def placement(cluster: Cluster, prefix: str) -> dict[str, str | None]:
    return {name: node for name, node in cluster.node_of().items() if name.startswith(prefix)}


def replicas(
    cluster: Cluster, prefix: str, count: int, scheduler: str = "", **spec: Any
) -> list[dict[str, Any]]:
    labels = {"app": prefix}
    return [pod(cluster, f"{prefix}-{index}", labels, scheduler, **spec) for index in range(count)]


def anti_affinity_on(key: str, app: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_required_anti_affinity_puts_replicas_on_distinct_nodes_and_the_fourth_pending(
    cluster: Cluster, kube_scheduler: str
) -> None:
    cluster.policy(CPU)
    three_nodes = in_nodes(HOSTNAME, "node-0", "node-1", "node-3")
    expected = (
        "0/6 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, "
        "3 node(s) didn't match pod anti-affinity rules."
    )
    messages = {}
    for scheduler, prefix in ((cluster.scheduler_name, "ours"), (kube_scheduler, "kube")):
        affinity = {"nodeAffinity": three_nodes, **anti_affinity_on(HOSTNAME, prefix)}
        create(cluster, *replicas(cluster, prefix, 4, scheduler, affinity=affinity))
        placed = eventually(
            lambda prefix=prefix: placement(cluster, prefix),
            lambda p: sum(1 for node in p.values() if node) == 3,
            what=f"three {prefix} replicas bound",
        )
        assert sorted(node for node in placed.values() if node) == ["node-0", "node-1", "node-3"]
        [pending] = [name for name, node in placed.items() if not node]
        messages[prefix] = eventually(
            lambda pending=pending: failed_scheduling(cluster, pending),
            bool,
            what=f"{prefix} FailedScheduling",
        )
    assert without_preemption(messages["kube"]) == expected
    # The preemption part too: no node holds a pod of lower priority, or evicting cannot help there.
    assert messages["ours"] == messages["kube"]


def test_zone_spread_with_max_skew_one_over_two_zones(cluster: Cluster, kube_scheduler: str) -> None:
    cluster.policy(CPU)
    two_zones = {"nodeAffinity": in_nodes(ZONE, "zone-a", "zone-b")}
    for scheduler, prefix in ((cluster.scheduler_name, "ours"), (kube_scheduler, "kube")):
        spread = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": prefix}},
            }
        ]
        create(
            cluster,
            *replicas(cluster, prefix, 5, scheduler, affinity=two_zones, topologySpreadConstraints=spread),
        )
        placed = eventually(
            lambda prefix=prefix: placement(cluster, prefix),
            lambda p: all(p.values()) and len(p) == 5,
            what=f"five {prefix} replicas bound",
        )
        per_zone = Counter(ZONES[node] for node in placed.values() if node)
        assert sorted(per_zone.items(), key=lambda item: item[1]) in (
            [("zone-a", 2), ("zone-b", 3)],
            [("zone-b", 2), ("zone-a", 3)],
        ), (scheduler, per_zone)


def test_preferred_affinity_moves_placement_when_load_is_equal(cluster: Cluster) -> None:
    cluster.policy(EQUAL_LOAD)
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["node-5"]}]}
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": term}]
        }
    }
    create(cluster, *replicas(cluster, "pref", 3, affinity=preferred))
    placed = eventually(
        lambda: placement(cluster, "pref"), lambda p: len(p) == 3 and all(p.values()), what="bound"
    )
    assert set(placed.values()) == {"node-5"}
    annotation = json.loads(
        next(p for p in cluster.pods() if p["metadata"]["name"] == "pref-0")["metadata"]["annotations"][
            "promsched.io/decision"
        ]
    )
    assert annotation["top"][0]["plugins"] == {"same": 50.0, "NodeAffinity": 100.0}


def test_a_pod_with_a_local_volume_lands_on_the_volumes_node(
    sandbox: Sandbox, cluster: Cluster, kube_scheduler: str
) -> None:
    cluster.policy(CPU)
    volume = f"local-{cluster.namespace}"
    waiting_class = f"wait-{cluster.namespace}"
    documents = [
        volume_manifest(volume, on="node-4", local_path="/mnt/data"),
        waiting_class_manifest(waiting_class),
    ]
    claims = [
        claim_manifest(cluster.namespace, "data", volume=volume),
        claim_manifest(cluster.namespace, "later", storage_class=waiting_class),
    ]
    try:
        create(cluster, *documents, *claims)
        eventually(
            lambda: json.loads(
                sandbox.kubectl("get", "pvc", "data", "-n", cluster.namespace, "-o", "json").stdout
            )["status"].get("phase"),
            lambda phase: phase == "Bound",
            what="the claim bound to the local volume",
        )
        uses = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        create(
            cluster,
            pod(cluster, "ours", {"app": "ours"}, volumes=uses),
            pod(cluster, "kube", {"app": "kube"}, kube_scheduler, volumes=uses),
            pod(
                cluster,
                "waits",
                {"app": "waits"},
                volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "later"}}],
            ),
        )
        # node-4 is among the busiest: load alone would never choose it.
        placed = eventually(
            lambda: cluster.node_of(), lambda p: p.get("ours") and p.get("kube"), what="bound"
        )
        assert placed["ours"] == placed["kube"] == "node-4"
        message = eventually(lambda: failed_scheduling(cluster, "waits"), bool, what="FailedScheduling")
        # No volume of its class, and a class without a provisioner: kube-scheduler's VolumeBinding words.
        assert without_preemption(message) == (
            "0/6 nodes are available: 6 node(s) didn't find available persistent volumes to bind."
        )
        assert cluster.node_of()["waits"] is None
    finally:
        sandbox.kubectl("delete", "namespace", cluster.namespace, "--ignore-not-found", "--timeout=180s")
        sandbox.kubectl("delete", "pv", volume, "--ignore-not-found", "--wait=false")
        sandbox.kubectl("delete", "storageclass", waiting_class, "--ignore-not-found")


def test_a_high_priority_pod_overtakes_a_queue_of_low_priority_ones(
    sandbox: Sandbox, cluster: Cluster
) -> None:
    classes = {level: f"{cluster.namespace}-{level}" for level in ("low", "high", "top")}
    values = {"low": 10, "high": 1000, "top": 100000}
    try:
        create(
            cluster,
            *(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": values[level],
                }
                for level, name in classes.items()
            ),
        )
        # Each pod takes most of node-1's 3900m: only the first one scheduled fits. They all wait for the
        # policy, which queues them at once; the high-priority pod, created last, must go first.
        only_node_1 = {"nodeSelector": {HOSTNAME: "node-1"}}
        create(
            cluster,
            *(
                pod(
                    cluster,
                    f"low-{index}",
                    {"app": "queue"},
                    cpu="3",
                    priorityClassName=classes["low"],
                    **only_node_1,
                )
                for index in range(5)
            ),
            pod(cluster, "high", {"app": "queue"}, cpu="3", priorityClassName=classes["high"], **only_node_1),
        )
        cluster.policy(CPU)
        placed = eventually(lambda: cluster.node_of(), lambda p: any(p.values()), what="one pod bound")
        assert {name for name, node in placed.items() if node} == {"high"}
        refused = (
            "0/6 nodes are available: 1 Insufficient cpu, "
            "5 node(s) didn't match Pod's node affinity/selector."
        )
        assert eventually(
            lambda: failed_scheduling(cluster, "low-0"), bool, what="FailedScheduling"
        ) == refused + preemption_note(
            "0/6 nodes are available: 1 No preemption victims found for incoming pod, "
            "5 Preemption is not helpful for scheduling."
        )
        # A pod of higher priority takes node-1 by preempting the high one (the lows may not preempt it).
        create(
            cluster,
            pod(cluster, "top", {"app": "queue"}, cpu="3", priorityClassName=classes["top"], **only_node_1),
        )
        message = eventually(lambda: failed_scheduling(cluster, "top"), bool, what="FailedScheduling")
        assert message == refused + found("node-1", 1)
        placed = eventually(
            lambda: cluster.node_of(), lambda p: p.get("top") == "node-1", what="top bound after preempting"
        )
        assert "high" not in placed
    finally:
        sandbox.kubectl("delete", "namespace", cluster.namespace, "--ignore-not-found", "--timeout=180s")
        sandbox.kubectl("delete", "priorityclass", *classes.values(), "--ignore-not-found")
