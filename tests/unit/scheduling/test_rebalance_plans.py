"""The rebalance plan: hot nodes by their sustained value, victims in order, and no move without a
destination that stays under the target."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.rebalance.plans import (
    BlockReason,
    Destination,
    Limits,
    RebalancePlan,
    RebalancePlanning,
    Share,
    Threshold,
    hot_nodes,
)
from support.objects import pod_info

CPU = Threshold("cpu", hot=85, target=70)
ROOMY = Limits(per_node=5, per_cycle=10, left_this_minute=10)


def plan(
    sustained: Mapping[str, float],
    current: Mapping[str, float],
    pods: Mapping[str, Sequence[PodInfo]],
    shares: Mapping[str, float],
    destinations: Mapping[str, str | None],
    limits: Limits = ROOMY,
    thresholds: Sequence[Threshold] = (CPU,),
) -> RebalancePlan:
    making = RebalancePlanning(
        thresholds,
        {threshold.plugin: sustained for threshold in thresholds},
        {threshold.plugin: current for threshold in thresholds},
        lambda node: pods.get(node, ()),
        lambda pod, _plugin, _node: share_of(pod, shares),
        lambda pod: Destination(destinations.get(pod.name), "0/3 nodes are available: 3 Insufficient cpu."),
        limits,
        "5m",
    )
    for _move in making.moves():  # every move taken as made, as in DryRun
        pass
    return making.plan()


def share_of(pod: PodInfo, shares: Mapping[str, float]) -> Share | None:
    points = shares.get(pod.name)
    return None if points is None else Share(points, "estimate: 1 x request")


def test_a_node_is_hot_only_when_it_stayed_past_the_threshold() -> None:
    hot = hot_nodes([CPU], {"cpu": {"a": 91.0, "b": 84.9, "c": 97.0}}, {"cpu": {"a": 95.0}})
    assert [(entry.node, entry.sustained, entry.current) for entry in hot] == [
        ("c", 97.0, None),
        ("a", 91.0, 95.0),
    ]


def test_a_node_that_cooled_inside_the_window_moves_nothing() -> None:
    # The lowest value over sustainedFor dipped under 85: not hot, though it is hot now.
    result = plan({"a": 80.0}, {"a": 95.0}, {"a": [pod_info("p")]}, {"p": 20.0}, {"p": "b"})
    assert (result.hot, result.moves, result.blocked) == ((), (), ())


def test_victims_lowest_priority_first_then_largest_share_until_under_target() -> None:
    pods = [
        pod_info("important", priority=100),
        pod_info("small", priority=0),
        pod_info("big", priority=0),
    ]
    shares = {"important": 30.0, "small": 5.0, "big": 15.0}
    result = plan(
        {"a": 90.0, "b": 20.0}, {"a": 90.0, "b": 20.0}, {"a": pods}, shares, dict.fromkeys(shares, "b")
    )
    # 90 - 15 (big) = 75 > 70, - 5 (small) = 70: done before the high-priority pod.
    assert [move.pod.name for move in result.moves] == ["big", "small"]
    assert result.moves[0].reason == (
        "a cpu 90% for 5m > 85%; its share: cpu 15% (estimate: 1 x request); "
        "expected destination b at cpu 35%"
    )
    assert result.moves[1].reason.endswith("expected destination b at cpu 40%")


def test_no_destination_under_the_target_means_no_move() -> None:
    result = plan(
        {"a": 90.0, "b": 60.0}, {"a": 90.0, "b": 60.0}, {"a": [pod_info("p")]}, {"p": 20.0}, {"p": "b"}
    )
    assert result.moves == ()
    [blocked] = result.blocked
    assert blocked.kind is BlockReason.DESTINATION_OVER_TARGET
    assert (
        blocked.reason
        == "a cpu 90% for 5m > 85%; the replacement would land on b at cpu 80%, past the target 70%"
    )


def test_earlier_moves_of_the_cycle_count_at_the_destination() -> None:
    pods = {"a": [pod_info("p1")], "c": [pod_info("p2")]}
    result = plan(
        {"a": 95.0, "c": 90.0, "b": 40.0},
        {"a": 95.0, "c": 90.0, "b": 40.0},
        pods,
        {"p1": 20.0, "p2": 20.0},
        {"p1": "b", "p2": "b"},
    )
    assert [move.pod.name for move in result.moves] == ["p1"]
    assert [blocked.kind for blocked in result.blocked] == [BlockReason.DESTINATION_OVER_TARGET]
    assert "land on b at cpu 80%" in result.blocked[0].reason


def test_a_replacement_that_lands_back_or_nowhere_blocks() -> None:
    pods = {"a": [pod_info("back"), pod_info("stuck")]}
    result = plan({"a": 95.0}, {"a": 95.0}, pods, {"back": 30.0, "stuck": 20.0}, {"back": "a", "stuck": None})
    assert result.moves == ()
    kinds = {blocked.pod: blocked.kind for blocked in result.blocked}
    assert kinds == {"ns/back": BlockReason.SAME_NODE, "ns/stuck": BlockReason.NO_DESTINATION}
    stuck = next(blocked for blocked in result.blocked if blocked.pod == "ns/stuck")
    assert stuck.reason.endswith("no node fits the replacement: 0/3 nodes are available: 3 Insufficient cpu.")


def test_limits_per_node_per_cycle_and_per_minute() -> None:
    pods = {"a": [pod_info("a1"), pod_info("a2")], "c": [pod_info("c1")]}
    values = {"a": 99.0, "c": 98.0, "b": 0.0}
    shares = {"a1": 10.0, "a2": 10.0, "c1": 10.0}
    destinations = dict.fromkeys(shares, "b")
    per_node = plan(
        values, values, pods, shares, destinations, Limits(per_node=1, per_cycle=10, left_this_minute=10)
    )
    assert [move.pod.name for move in per_node.moves] == ["a1", "c1"]
    assert BlockReason.NODE_LIMIT in {blocked.kind for blocked in per_node.blocked}
    per_cycle = plan(
        values, values, pods, shares, destinations, Limits(per_node=5, per_cycle=1, left_this_minute=10)
    )
    assert [move.pod.name for move in per_cycle.moves] == ["a1"]
    assert BlockReason.CYCLE_LIMIT in {blocked.kind for blocked in per_cycle.blocked}
    rate = plan(
        values, values, pods, shares, destinations, Limits(per_node=5, per_cycle=10, left_this_minute=0)
    )
    assert rate.moves == ()
    assert {blocked.kind for blocked in rate.blocked} == {BlockReason.RATE_LIMIT}


def test_a_hot_node_without_movable_pods_says_so() -> None:
    result = plan({"a": 95.0}, {"a": 95.0}, {}, {}, {})
    [blocked] = result.blocked
    assert (blocked.kind, blocked.reason) == (
        BlockReason.NO_MOVABLE_POD,
        "a cpu 95% for 5m > 85%; no pod on it may move",
    )


def test_an_unknown_share_blocks_the_pod() -> None:
    result = plan({"a": 95.0}, {"a": 95.0}, {"a": [pod_info("p")]}, {}, {"p": "b"})
    assert [blocked.kind for blocked in result.blocked] == [BlockReason.UNKNOWN_SHARE]


def test_higher_is_better_plugins_relieve_upwards() -> None:
    free = Threshold("freeSlots", hot=2, target=5, higher_is_better=True, is_percent=False)
    result = plan(
        {"a": 1.0, "b": 10.0},
        {"a": 1.0, "b": 10.0},
        {"a": [pod_info("p")]},
        {"p": 4.0},
        {"p": "b"},
        thresholds=(free,),
    )
    [move] = result.moves
    assert move.reason == (
        "a freeSlots 1 for 5m < 2; its share: freeSlots 4 (estimate: 1 x request); "
        "expected destination b at freeSlots 6"
    )


def planning(
    pods: Sequence[PodInfo], limits: Limits, deferred: frozenset[str] = frozenset()
) -> RebalancePlanning:
    """Node a at 99 with `pods`, each 10 points, every replacement fitting on b."""
    values = {"a": 99.0, "b": 0.0}
    return RebalancePlanning(
        (CPU,),
        {"cpu": values},
        {"cpu": values},
        lambda node: pods if node == "a" else (),
        lambda pod, _plugin, _node: Share(10.0, "observed over 5m"),
        lambda pod: Destination("b"),
        limits,
        "5m",
        deferred=deferred,
    )


def test_a_refused_move_spends_no_limit_and_the_next_candidate_is_tried() -> None:
    pods = [pod_info("p1"), pod_info("p2"), pod_info("p3")]
    making = planning(pods, Limits(per_node=1, per_cycle=5, left_this_minute=5))
    tried = []
    for move in making.moves():
        tried.append(move.pod.name)
        if move.pod.name == "p1":
            making.refuse(move, BlockReason.DISRUPTION_BUDGET, "eviction refused by a PodDisruptionBudget")
    result = making.plan()
    assert tried == ["p1", "p2"]
    assert [move.pod.name for move in result.moves] == ["p2"]
    assert [(blocked.pod, blocked.kind) for blocked in result.blocked] == [
        ("ns/p1", BlockReason.DISRUPTION_BUDGET),
        ("ns/p3", BlockReason.NODE_LIMIT),
    ]


def test_a_move_that_may_have_happened_spends_the_limits_but_relieves_nothing() -> None:
    pods = [pod_info(f"p{index}") for index in range(1, 5)]
    making = planning(pods, Limits(per_node=3, per_cycle=10, left_this_minute=10))
    for move in making.moves():
        if move.pod.name == "p1":
            making.refuse(move, BlockReason.EVICTION_FAILED, "eviction failed", may_have_left=True)
    result = making.plan()
    # 99 - 10 (p2) - 10 (p3) = 79: still past the target, and p1, p2, p3 spent the node's three.
    assert [move.pod.name for move in result.moves] == ["p2", "p3"]
    assert [(blocked.pod, blocked.kind) for blocked in result.blocked] == [
        ("ns/p1", BlockReason.EVICTION_FAILED),
        ("ns/p4", BlockReason.NODE_LIMIT),
    ]


def test_deferred_pods_are_tried_after_the_others() -> None:
    pods = [pod_info("p1", priority=0), pod_info("p2", priority=10)]
    deferred = frozenset({pods[0].uid})
    making = planning(pods, Limits(per_node=1, per_cycle=10, left_this_minute=10), deferred)
    assert [move.pod.name for move in making.moves()] == ["p2"]
