"""Topology spread constraints with kube-scheduler's semantics: DoNotSchedule filters, ScheduleAnyway
scores, minDomains and the node inclusion policies."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.objects.pods import PodInfo, PodSpecError
from promsched.scheduling.scores.topology_spread import PodTopologySpreadScore
from support.objects import ZONE, node, pod, pod_object
from support.placement import cache_with, decide_evenly
from support.preemption import no_victims

SKEWED = "node(s) didn't match pod topology spread constraints"
WEB = {"app": "web"}


def spread(when: str = "DoNotSchedule", **constraint: Any) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": WEB},
            **constraint,
        }
    ]


def web(name: str, node_name: str = "", namespace: str = "ns", **options: Any) -> PodInfo:
    return pod(name, namespace, labels={**WEB, **options.pop("labels", {})}, node_name=node_name, **options)


def test_max_skew_one_over_two_zones_alternates_the_zones() -> None:
    cache = cache_with([node("a1", "zone-a"), node("a2", "zone-a"), node("b1", "zone-b")])
    zones = []
    for index in range(4):
        replica = web(f"web-{index}", topologySpreadConstraints=spread())
        outcome = decide_evenly(replica, cache)
        assert outcome.node is not None
        cache.assume(replica, outcome.node)
        zones.append(cache.nodes[outcome.node].labels[ZONE])
    assert sorted(zones[:2]) == sorted(zones[2:]) == ["zone-a", "zone-b"]
    assert decide_evenly(web("web-4", topologySpreadConstraints=spread()), cache).filtered == {}  # 2 and 2
    cache.assume(web("web-4"), "b1")
    outcome = decide_evenly(web("web-5", topologySpreadConstraints=spread()), cache)
    assert cache.nodes[outcome.node or ""].labels[ZONE] == "zone-a"
    assert outcome.filtered == {SKEWED: 1}


def test_a_node_without_the_topology_key_is_refused_with_kubes_reason() -> None:
    cache = cache_with([node("bare", zone=None), node("a1")])
    outcome = decide_evenly(web("web", topologySpreadConstraints=spread()), cache)
    assert outcome.node == "a1"
    assert outcome.filtered == {f"{SKEWED} (missing required label)": 1}


def test_fewer_domains_than_min_domains_count_the_minimum_as_zero() -> None:
    nodes = [node("a1", "zone-a"), node("b1", "zone-b")]
    existing = [web("web-0", "a1"), web("web-1", "b1")]
    assert decide_evenly(web("web-2", topologySpreadConstraints=spread()), cache_with(nodes, existing)).node
    outcome = decide_evenly(
        web("web-2", topologySpreadConstraints=spread(minDomains=3)), cache_with(nodes, existing)
    )
    assert outcome.message == f"0/2 nodes are available: 2 {SKEWED}." + no_victims(2)


def test_node_affinity_policy_decides_whether_unselected_nodes_count() -> None:
    nodes = [
        node("a1", "zone-a", labels={"pool": "main"}),
        node("b1", "zone-b", labels={"pool": "main"}),
        node("c1", "zone-c", labels={"pool": "batch"}),
    ]
    cache = cache_with(nodes, [web("web-0", "a1"), web("web-1", "b1")])
    honour = web("web-2", nodeSelector={"pool": "main"}, topologySpreadConstraints=spread())
    assert decide_evenly(honour, cache).node in {"a1", "b1"}
    ignore = web(
        "web-2", nodeSelector={"pool": "main"}, topologySpreadConstraints=spread(nodeAffinityPolicy="Ignore")
    )
    # Empty zone-c counts now: the global minimum is 0, and both selectable zones hold one pod already.
    assert decide_evenly(ignore, cache).filtered == {
        SKEWED: 2,
        "node(s) didn't match Pod's node affinity/selector": 1,
    }


def test_node_taints_policy_honour_leaves_out_nodes_the_pod_cannot_tolerate() -> None:
    tainted = node("c1", "zone-c", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    cache = cache_with(
        [node("a1", "zone-a"), node("b1", "zone-b"), tainted], [web("w0", "a1"), web("w1", "b1")]
    )
    assert decide_evenly(web("w2", topologySpreadConstraints=spread()), cache).node is None
    assert decide_evenly(web("w2", topologySpreadConstraints=spread(nodeTaintsPolicy="Honor")), cache).node


def test_only_live_pods_of_the_same_namespace_count() -> None:
    nodes = [node("a1", "zone-a"), node("b1", "zone-b")]
    elsewhere = web("w0", "a1", namespace="other")
    terminating = web("w1", "a1", deleting=True)
    cache = cache_with(nodes, [elsewhere, terminating, web("w2", "a1")])
    # Only w2 counts: zone-a 1 + the pod itself - 0 = 2 > 1.
    assert decide_evenly(web("w3", topologySpreadConstraints=spread()), cache).filtered == {SKEWED: 1}


def test_match_label_keys_narrow_the_count_to_the_pods_own_values() -> None:
    nodes = [node("a1", "zone-a"), node("b1", "zone-b")]
    old = [web(f"v1-{index}", "a1", labels={"version": "v1"}) for index in range(3)]
    cache = cache_with(nodes, old)
    rollout = web(
        "v2-0", labels={"version": "v2"}, topologySpreadConstraints=spread(matchLabelKeys=["version"])
    )
    assert decide_evenly(rollout, cache).filtered == {}
    mixed = web("v2-0", labels={"version": "v2"}, topologySpreadConstraints=spread())
    assert decide_evenly(mixed, cache).filtered == {SKEWED: 1}


def test_a_pod_its_selector_does_not_match_does_not_count_itself() -> None:
    cache = cache_with([node("a1", "zone-a"), node("b1", "zone-b")], [web("w0", "a1")])
    outsider = pod("db", labels={"app": "db"}, topologySpreadConstraints=spread())
    assert decide_evenly(outsider, cache).filtered == {}


def test_schedule_anyway_scores_emptier_domains_higher_as_kube_does() -> None:
    nodes = [node("a1", "zone-a"), node("b1", "zone-b"), node("c1", "zone-c"), node("bare", zone=None)]
    cache = cache_with(nodes, [web("w0", "a1"), web("w1", "a1"), web("w2", "b1")])
    soft = web("w3", topologySpreadConstraints=spread("ScheduleAnyway"))
    result = PodTopologySpreadScore().score(soft, cache, list(cache.nodes.values()))
    assert result is not None
    # log(3 zones + 2) = 1.609 per pod: zone-a 2 pods -> 3, zone-b 1 -> 2, zone-c 0 -> 0.
    assert result.raw == [3.0, 2.0, 0.0, None]
    assert result.scores == [0.0, 33.0, 100.0, 0.0]
    assert decide_evenly(soft, cache).node == "c1"


def test_schedule_anyway_constraints_never_filter() -> None:
    cache = cache_with([node("a1", "zone-a"), node("b1", "zone-b")], [web(f"w{i}", "a1") for i in range(5)])
    outcome = decide_evenly(web("w", topologySpreadConstraints=spread("ScheduleAnyway")), cache)
    assert outcome.filtered == {}
    assert outcome.node == "b1"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"maxSkew": 0}, "maxSkew"),
        ({"whenUnsatisfiable": "Sometimes"}, "whenUnsatisfiable"),
        ({"nodeTaintsPolicy": "Maybe"}, "nodeTaintsPolicy"),
        ({"topologyKey": ""}, "topologyKey"),
    ],
)
def test_malformed_constraints_are_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(PodSpecError, match=rf"spec\.topologySpreadConstraints\[0\]\.{field}: "):
        PodInfo.from_object(pod_object("p", topologySpreadConstraints=spread(**change)))
