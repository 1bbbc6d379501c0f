"""Preemption is never done; a pod that evictions of lower-priority pods would make fit is told so."""

from __future__ import annotations

from typing import Any

from promsched.scheduling.nodes import NodeInfo
from promsched.scheduling.pods import PodInfo
from support.objects import ZONE, node, pod
from support.placement import anti_affinity, cache_with, decide_evenly, required_term

NOTE = (
    " preemption: promsched does not preempt lower-priority pods "
    "(evicting some would make room on {} node(s))."
)
TWO_NODES = [node("n1", cpu="2"), node("n2", cpu="2")]


def big(name: str, priority: int, node_name: str = "", **spec: Any) -> PodInfo:
    return pod(name, cpu="1500m", node_name=node_name, priority=priority, **spec)


def full(nodes: list[NodeInfo], priority: int) -> list[PodInfo]:
    return [big(f"low-{info.name}", priority, info.name) for info in nodes]


def test_a_pod_that_evictions_would_fit_is_told_promsched_does_not_preempt() -> None:
    outcome = decide_evenly(big("urgent", 1000), cache_with(TWO_NODES, full(TWO_NODES, 0)))
    assert outcome.node is None
    assert outcome.message == "0/2 nodes are available: 2 Insufficient cpu." + NOTE.format(2)


def test_pods_of_equal_or_higher_priority_are_no_victims() -> None:
    outcome = decide_evenly(big("peer", 0), cache_with(TWO_NODES, full(TWO_NODES, 0)))
    assert outcome.message == "0/2 nodes are available: 2 Insufficient cpu."


def test_a_pod_that_may_not_preempt_is_not_told_about_preemption() -> None:
    polite = big("polite", 1000, preemptionPolicy="Never")
    outcome = decide_evenly(polite, cache_with(TWO_NODES, full(TWO_NODES, 0)))
    assert outcome.message == "0/2 nodes are available: 2 Insufficient cpu."


def test_evictions_cannot_lift_node_affinity() -> None:
    pinned = big("pinned", 1000, nodeSelector={"kubernetes.io/hostname": "n1"})
    cache = cache_with(TWO_NODES, [*full(TWO_NODES[:1], 0), big("high-n2", 2000, "n2")])
    outcome = decide_evenly(pinned, cache)
    assert outcome.message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector."
        + NOTE.format(1)
    )
    # Only n1 could be freed, and only of the pod with lower priority.
    assert decide_evenly(big("pinned", 0, nodeSelector={"kubernetes.io/hostname": "n1"}), cache).message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector."
    )


def test_evicting_lower_priority_pods_that_repel_is_judged_node_by_node() -> None:
    web = {"app": "web"}
    blockers = [pod(f"web-{info.name}", labels=web, node_name=info.name, priority=5) for info in TWO_NODES]
    cache = cache_with(TWO_NODES, blockers)
    apart = pod("web-new", labels=web, priority=10, affinity=anti_affinity(required_term(web)))
    reason = "2 node(s) didn't match pod anti-affinity rules."
    assert decide_evenly(apart, cache).message == f"0/2 nodes are available: {reason}" + NOTE.format(2)
    # Both nodes are in one zone: evicting one node's pod leaves the other's there, so no node frees up
    # (and the pod taken away while judging n1 is back when n2 is judged).
    zone_apart = pod("web-new", labels=web, priority=10, affinity=anti_affinity(required_term(web, ZONE)))
    assert decide_evenly(zone_apart, cache).message == f"0/2 nodes are available: {reason}"
