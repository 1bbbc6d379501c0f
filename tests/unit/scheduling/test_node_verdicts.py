"""The node filters' verdicts kept across pods: a changed node, or one whose pods changed, is judged
anew, pods that differ in what the filters read do not share verdicts, and only the leading node-only
filters are kept unless the rest read the nodes' usage totals alone."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import Outcome, decide
from promsched.scheduling.cycle.memos import DecisionMemo
from promsched.scheduling.filters import DEFAULT_FILTERS
from promsched.scheduling.filters.fit import NodeResourcesFit
from promsched.scheduling.filters.node_verdicts import (
    SPECS_KEPT,
    NodeVerdicts,
    node_only_prefix,
    usage_totals_only,
)
from promsched.scheduling.filters.ports import NodePorts
from promsched.scheduling.filters.taints import TaintToleration
from promsched.scheduling.filters.unschedulable import NodeUnschedulable
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo, Toleration
from support.objects import node, pod, pod_info
from support.snapshots import cpu_snapshot

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TAINTED = "node(s) had untolerated taint {dedicated: gpu}"


@pytest.fixture
def cache() -> ClusterCache:
    cache = ClusterCache()
    cache.upsert_node(node("idle"))
    cache.upsert_node(node("busy"))
    return cache


@pytest.fixture
def memo() -> DecisionMemo:
    return DecisionMemo(cpu_snapshot({"idle": 10.0, "busy": 90.0}))


def decided(pod_info: PodInfo, cache: ClusterCache, memo: DecisionMemo) -> Outcome:
    return decide(pod_info, cache, memo.snapshot, memo=memo)


def updated(name: str, **options: Any) -> NodeInfo:
    return node(name, version="2", **options)


def test_a_node_tainted_after_a_decision_is_judged_anew(cache: ClusterCache, memo: DecisionMemo) -> None:
    assert decided(pod("a"), cache, memo).node == "idle"
    cache.upsert_node(updated("idle", taints=[TAINT]))
    outcome = decided(pod("b"), cache, memo)
    assert outcome.node == "busy"
    assert outcome.filtered == {TAINTED: 1}


def test_a_node_whose_taint_is_lifted_takes_pods_again(cache: ClusterCache, memo: DecisionMemo) -> None:
    cache.upsert_node(updated("idle", taints=[TAINT]))
    assert decided(pod("a"), cache, memo).node == "busy"
    cache.upsert_node(updated("idle"))
    assert decided(pod("b"), cache, memo).node == "idle"


def test_a_cordoned_node_is_judged_anew(cache: ClusterCache, memo: DecisionMemo) -> None:
    assert decided(pod("a"), cache, memo).node == "idle"
    cache.upsert_node(updated("idle", unschedulable=True))
    assert decided(pod("b"), cache, memo).filtered == {"node(s) were unschedulable": 1}


def test_pods_that_tolerate_differently_do_not_share_verdicts(
    cache: ClusterCache, memo: DecisionMemo
) -> None:
    cache.upsert_node(updated("idle", taints=[TAINT]))
    assert decided(pod("a"), cache, memo).node == "busy"
    tolerating = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    assert decided(pod("b", tolerations=tolerating), cache, memo).node == "idle"
    assert decided(pod("c"), cache, memo).node == "busy"


def test_only_the_leading_node_only_filters_are_kept() -> None:
    assert node_only_prefix(DEFAULT_FILTERS) == 5
    assert node_only_prefix((NodeUnschedulable(), NodePorts(), TaintToleration())) == 1
    assert node_only_prefix((NodeResourcesFit(), NodeUnschedulable())) == 0


def test_a_node_filled_by_a_placed_pod_is_judged_anew(cache: ClusterCache, memo: DecisionMemo) -> None:
    first = pod("a", cpu="3")
    assert decided(first, cache, memo).node == "idle"
    cache.assume(first, "idle")
    outcome = decided(pod("b", cpu="3"), cache, memo)
    assert outcome.node == "busy"
    assert outcome.filtered == {"Insufficient cpu": 1}
    cache.forget(first.uid)
    assert decided(pod("c", cpu="3"), cache, memo).node == "idle"


def test_a_node_whose_pod_was_replaced_by_a_bigger_one_is_judged_anew(
    cache: ClusterCache, memo: DecisionMemo
) -> None:
    small = pod("small", cpu="100m")
    cache.assume(small, "idle")
    assert decided(pod("a", cpu="3"), cache, memo).node == "idle"
    cache.forget(small.uid)
    cache.assume(pod("big", cpu="2"), "idle")  # as many pods on the node, more requested
    assert decided(pod("b", cpu="3"), cache, memo).filtered == {"Insufficient cpu": 1}


def test_pods_that_request_differently_do_not_share_verdicts(cache: ClusterCache, memo: DecisionMemo) -> None:
    cache.assume(pod("placed", cpu="3"), "idle")
    assert decided(pod("big", cpu="2"), cache, memo).filtered == {"Insufficient cpu": 1}
    assert decided(pod("small", cpu="500m"), cache, memo).node == "idle"
    assert decided(pod("big-again", cpu="2"), cache, memo).node == "busy"


def test_usage_totals_only_when_no_filter_reads_more_of_the_usage() -> None:
    assert usage_totals_only((NodeResourcesFit(),))
    assert usage_totals_only(())
    assert not usage_totals_only((NodePorts(), NodeResourcesFit()))
    assert not usage_totals_only((NodeUnschedulable(),))


def test_the_least_recently_used_specs_are_let_go() -> None:
    verdicts = NodeVerdicts()
    filters = (TaintToleration(),)
    first = verdicts.of(filters, pod_info("first"))
    first["n1"] = (node("n1"), None, 0, None)
    for index in range(SPECS_KEPT):
        tolerating = (Toleration(key=f"key-{index}", operator="Exists"),)
        verdicts.of(filters, pod_info(f"p{index}", tolerations=tolerating))
    assert verdicts.of(filters, pod_info("again")) == {}
