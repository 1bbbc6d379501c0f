"""The per-pod lookup: weighted totals, onMissingMetrics, staleness, thresholds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from promsched.api.policies import SchedulingPolicySpec
from promsched.metrics import (
    NEUTRAL_SCORE,
    FilterReason,
    ScoreMemo,
    Snapshot,
    plan_from_policy,
    score_nodes,
)
from support import snapshots

AT = 1_000_000.0  # when the samples were taken

CPU_AND_MEMORY = ({"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1})


def snapshot_of(spec: SchedulingPolicySpec, values: dict[str, dict[str, float]], at: float = AT) -> Snapshot:
    return snapshots.snapshot_of(plan_from_policy(spec), values, at)


def by_node(snapshot: Snapshot, nodes: list[str], now: float = AT) -> dict[str, Any]:
    return {result.node: result for result in score_nodes(snapshot, nodes, now=now)}


def test_weighted_total(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    snapshot = snapshot_of(make_spec(*CPU_AND_MEMORY), {"cpu": {"n": 10}, "memory": {"n": 50}})
    [result] = score_nodes(snapshot, ["n"], now=AT)
    assert result.total == pytest.approx((3 * 90 + 1 * 50) / 4)
    assert [(p.name, p.raw, p.score) for p in result.plugins] == [("cpu", 10, 90), ("memory", 50, 50)]
    assert result.feasible


def test_small_differences_stay_small(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    snapshot = snapshot_of(make_spec({"name": "cpu"}), {"cpu": {"a": 1, "b": 2}})
    results = by_node(snapshot, ["a", "b"])
    assert (results["a"].total, results["b"].total) == (99, 98)


def test_all_zero_loads(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    snapshot = snapshot_of(make_spec(*CPU_AND_MEMORY), {"cpu": {"a": 0, "b": 0}, "memory": {"a": 0, "b": 0}})
    assert [result.total for result in score_nodes(snapshot, ["a", "b"], now=AT)] == [100, 100]


@pytest.mark.parametrize(
    ("on_missing", "total", "memory_score", "reasons"),
    [
        ("Ignore", 90.0, None, ()),
        ("Neutral", (3 * 90 + 1 * NEUTRAL_SCORE) / 4, NEUTRAL_SCORE, ()),
        ("Unschedulable", 90.0, None, (FilterReason("memory metrics missing", "n: no sample"),)),
    ],
)
def test_on_missing_metrics(
    make_spec: Callable[..., SchedulingPolicySpec],
    on_missing: str,
    total: float,
    memory_score: float | None,
    reasons: tuple[FilterReason, ...],
) -> None:
    spec = make_spec(*CPU_AND_MEMORY, onMissingMetrics=on_missing)
    [result] = score_nodes(snapshot_of(spec, {"cpu": {"n": 10}}), ["n"], now=AT)
    assert result.total == pytest.approx(total)
    assert result.plugins[1] == ("memory", None, memory_score)
    assert result.reasons == reasons


def test_a_stale_sample_counts_as_missing(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    spec = make_spec({"name": "cpu"}, staleAfter="2m", onMissingMetrics="Unschedulable")
    snapshot = snapshot_of(spec, {"cpu": {"n": 10}})
    [fresh] = score_nodes(snapshot, ["n"], now=AT + 119)
    assert (fresh.total, fresh.feasible) == (90, True)
    [stale] = score_nodes(snapshot, ["n"], now=AT + 121)
    assert stale.plugins[0] == ("cpu", None, None)
    assert stale.reasons == (FilterReason("cpu metrics missing", "n: a stale sample"),)


def test_threshold_reasons_aggregate_by_key(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    spec = make_spec({"name": "cpu", "threshold": 85}, {"name": "memory", "threshold": 90})
    snapshot = snapshot_of(spec, {"cpu": {"a": 91, "b": 97.6, "c": 10}, "memory": {"a": 95, "b": 1, "c": 1}})
    results = by_node(snapshot, ["a", "b", "c"])
    assert results["a"].reasons == (
        FilterReason("cpu load above 85%", "a cpu load 91%"),
        FilterReason("memory use above 90%", "a memory use 95%"),
    )
    assert results["b"].reasons == (FilterReason("cpu load above 85%", "b cpu load 98%"),)
    assert results["c"].feasible


def test_a_weight_zero_plugin_filters_without_scoring(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    spec = make_spec({"name": "cpu", "weight": 1}, {"name": "diskSpace", "weight": 0, "threshold": 90})
    snapshot = snapshot_of(spec, {"cpu": {"a": 20, "b": 20}, "diskSpace": {"a": 10, "b": 95}})
    results = by_node(snapshot, ["a", "b"])
    assert (results["a"].total, results["b"].total) == (80, 80)
    assert results["a"].feasible
    assert not results["b"].feasible


def test_nothing_counts_gives_neutral(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    spec = make_spec({"name": "cpu"}, onMissingMetrics="Ignore")
    [result] = score_nodes(snapshot_of(spec, {}), ["n"], now=AT)
    assert (result.total, result.feasible) == (NEUTRAL_SCORE, True)


def test_before_the_first_refresh(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    snapshot = Snapshot.empty(plan_from_policy(make_spec(*CPU_AND_MEMORY)), AT)
    assert [result.total for result in score_nodes(snapshot, ["a", "b"], now=AT)] == [NEUTRAL_SCORE] * 2


def test_order_and_status_form(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    snapshot = snapshot_of(make_spec(*CPU_AND_MEMORY), {"cpu": {"b": 10, "a": 20}, "memory": {"a": 1}})
    results = score_nodes(snapshot, ["b", "a"], now=AT)
    assert [result.node for result in results] == ["b", "a"]
    assert results[0].to_api().to_object() == {
        "node": "b",
        "total": pytest.approx((3 * 90 + 50) / 4),
        "plugins": [{"name": "cpu", "raw": 10.0, "score": 90.0}, {"name": "memory", "score": 50.0}],
    }


def test_thousands_of_nodes_are_quick(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    names = ["cpu", "memory", "diskIO", "diskSpace", "network"]
    nodes = [f"node-{i}" for i in range(2000)]
    spec = make_spec(*({"name": name, "threshold": 99} for name in names))
    snapshot = snapshot_of(spec, {name: {node: i % 100 for i, node in enumerate(nodes)} for name in names})
    started = time.perf_counter()
    results = score_nodes(snapshot, nodes, now=AT)
    elapsed = time.perf_counter() - started
    assert len(results) == 2000
    assert elapsed < 1.0, f"scoring 2000 nodes x 5 plugins took {elapsed:.3f}s"


def test_extra_load_is_added_to_load_percentages(make_spec: Callable[..., SchedulingPolicySpec]) -> None:
    spec = make_spec({"name": "cpu", "threshold": 85}, {"name": "gpu", "query": "g", "weight": 0})
    snapshot = snapshot_of(spec, {"cpu": {"a": 80, "b": 80}, "gpu": {"a": 1, "b": 2}})
    extra = {"a": {"cpu": 10.0, "gpu": 50.0}}
    results = {result.node: result for result in score_nodes(snapshot, ["a", "b"], now=AT, extra_load=extra)}
    assert results["a"].plugins[0] == ("cpu", 90, 10)
    assert results["a"].reasons == (FilterReason("cpu load above 85%", "a cpu load 90%"),)
    assert results["a"].plugins[1] == ("gpu", 1, 100)  # a custom value is no load percentage: unchanged
    assert results["b"].plugins[0] == ("cpu", 80, 20)
    assert results["b"].feasible


def test_requests_score_a_missing_cpu_or_memory_sample_by_the_share_requested(
    make_spec: Callable[..., SchedulingPolicySpec],
) -> None:
    """onMissingMetrics Requests: a node whose cpu or memory sample is missing or stale scores
    100 - the share of it its pods request, as kube-scheduler's LeastAllocated; a plugin without a share
    scores neutral, the herd's extra load is not added (the requests hold the new pods), and a share past
    the threshold filters nothing (it is no reading)."""
    spec = make_spec(
        {"name": "cpu", "weight": 3, "threshold": 50},
        {"name": "memory", "weight": 1},
        {"name": "diskIO", "weight": 1},
        onMissingMetrics="Requests",
        staleAfter="2m",
    )
    snapshot = snapshot_of(spec, {"cpu": {"a": 10, "b": 10}, "memory": {"a": 20}})
    shares = {"a": {"cpu": 70.0, "memory": 40.0}, "b": {"cpu": 30.0, "memory": 60.0}}
    extra = {"a": {"cpu": 5.0}}

    fresh = {r.node: r for r in score_nodes(snapshot, ["a", "b"], now=AT, requested=shares.__getitem__)}
    assert fresh["a"].plugins == (("cpu", 10, 90), ("memory", 20, 80), ("diskIO", None, NEUTRAL_SCORE))
    assert fresh["b"].plugins[1] == ("memory", None, 40)  # b lacks a memory sample only

    stale = score_nodes(snapshot, ["a", "b"], now=AT + 121, extra_load=extra, requested=shares.__getitem__)
    assert [r.plugins for r in stale] == [
        (("cpu", None, 30), ("memory", None, 60), ("diskIO", None, NEUTRAL_SCORE)),
        (("cpu", None, 70), ("memory", None, 40), ("diskIO", None, NEUTRAL_SCORE)),
    ]
    assert [r.total for r in stale] == [pytest.approx((90 + 60 + 50) / 5), pytest.approx((210 + 40 + 50) / 5)]
    assert all(r.feasible for r in stale)


@pytest.mark.parametrize("on_missing", ["Neutral", "Ignore", "Unschedulable"])
def test_other_policies_read_no_requested_share(
    make_spec: Callable[..., SchedulingPolicySpec], on_missing: str
) -> None:
    spec = make_spec({"name": "cpu"}, onMissingMetrics=on_missing)

    def requested(node: str) -> dict[str, float]:
        raise AssertionError(f"{node}'s requested share read under {on_missing}")

    [result] = score_nodes(snapshot_of(spec, {}), ["n"], now=AT, requested=requested)
    assert result.plugins[0].raw is None


def test_a_memo_scores_a_node_anew_when_its_requested_share_changes(
    make_spec: Callable[..., SchedulingPolicySpec],
) -> None:
    snapshot = snapshot_of(make_spec({"name": "cpu"}, onMissingMetrics="Requests"), {})
    memo = ScoreMemo()
    shares = {"n": {"cpu": 20.0}}
    [before] = score_nodes(snapshot, ["n"], now=AT, requested=shares.__getitem__, memo=memo)
    [again] = score_nodes(snapshot, ["n"], now=AT, requested=lambda node: {"cpu": 20.0}, memo=memo)
    shares["n"] = {"cpu": 45.0}
    [after] = score_nodes(snapshot, ["n"], now=AT, requested=shares.__getitem__, memo=memo)
    assert again is before  # an equal share is looked up
    assert (before.total, after.total) == (80, 55)
