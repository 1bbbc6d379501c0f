"""The herd adjustment: recently placed pods weigh on their node until the metrics show them."""

from __future__ import annotations

import pytest

from promsched.metrics import Snapshot, plan_from_policy
from promsched.metrics.planning import Plan
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.herding import METRIC_LAG_SECONDS, HerdWindow, herd_memory_seconds
from promsched.scheduling.cycle.memos import DecisionMemo, herd_adjustments
from promsched.scheduling.objects.resources import Resources
from support.clocks import Clock
from support.objects import GIB, node, pod_info
from support.policies import policy_spec
from support.snapshots import snapshot_of

READ_AT = 100_000.0


def plan(cpu_range: str = "1m", memory_range: str = "0s") -> Plan:
    return plan_from_policy(
        policy_spec(
            {"name": "cpu", "timeRange": cpu_range},
            {"name": "memory", "timeRange": memory_range},
            {"name": "diskIO"},
        )
    )


def snapshot(read_at: float = READ_AT, **ranges: str) -> Snapshot:
    the_plan = plan(**ranges)
    return snapshot_of(the_plan, {p.name: {"n1": 10.0, "n2": 10.0} for p in the_plan.plugins}, read_at)


def placed(cache: ClusterCache, clock: Clock, name: str, at: float, node_name: str = "n1") -> None:
    clock.now = at
    cache.assume(pod_info(name, requests=Resources(1000, 4 * GIB, 0)), node_name)


@pytest.fixture
def clock() -> Clock:
    return Clock(READ_AT)


@pytest.fixture
def cache(clock: Clock) -> ClusterCache:
    cache = ClusterCache(clock=clock)
    cache.upsert_node(node("n1"))  # 4 CPUs, 16 GiB
    cache.upsert_node(node("n2"))
    return cache


@pytest.mark.parametrize(
    ("placed_before_read", "window", "unseen"),
    [
        (-5.0, 60.0, 1.0),  # placed after the read
        (METRIC_LAG_SECONDS, 60.0, 1.0),  # not scraped yet
        (METRIC_LAG_SECONDS + 15.0, 60.0, 0.75),  # a quarter of the window shows it
        (METRIC_LAG_SECONDS + 60.0, 60.0, 0.0),
        (METRIC_LAG_SECONDS - 1.0, 0.0, 1.0),  # an instant value: all or nothing
        (METRIC_LAG_SECONDS + 1.0, 0.0, 0.0),
    ],
)
def test_the_unseen_share_grows_out_over_the_window(
    placed_before_read: float, window: float, unseen: float
) -> None:
    assert HerdWindow("cpu", READ_AT, window).unseen(READ_AT - placed_before_read) == pytest.approx(unseen)


def test_a_fresh_placement_adds_its_requests_as_percent_of_allocatable(
    cache: ClusterCache, clock: Clock
) -> None:
    placed(cache, clock, "a", READ_AT + 1)
    assert herd_adjustments(cache, DecisionMemo(snapshot()), ["n1", "n2"]) == {
        "n1": {"cpu": 25.0, "memory": 25.0}
    }


def test_older_placements_count_for_what_each_window_does_not_show(cache: ClusterCache, clock: Clock) -> None:
    # Placed 45 s before the read: 15 s of the 1m cpu rate show it, the instant memory value does.
    placed(cache, clock, "a", READ_AT - METRIC_LAG_SECONDS - 15)
    assert herd_adjustments(cache, DecisionMemo(snapshot()), ["n1"]) == {"n1": {"cpu": 18.75}}
    # Long enough ago for every window: nothing to add.
    assert herd_adjustments(cache, DecisionMemo(snapshot(READ_AT + 60)), ["n1"]) == {}


def test_adjustments_follow_new_placements_within_one_snapshot(cache: ClusterCache, clock: Clock) -> None:
    taken = DecisionMemo(snapshot())
    placed(cache, clock, "a", READ_AT + 1)
    first = herd_adjustments(cache, taken, ["n1", "n2"])
    assert herd_adjustments(cache, taken, ["n1", "n2"])["n1"] is first["n1"]  # worked out once
    placed(cache, clock, "b", READ_AT + 2)
    placed(cache, clock, "c", READ_AT + 3, "n2")
    assert herd_adjustments(cache, taken, ["n1", "n2"]) == {
        "n1": {"cpu": 50.0, "memory": 50.0},
        "n2": {"cpu": 25.0, "memory": 25.0},
    }
    cache.forget("uid-b")
    assert herd_adjustments(cache, taken, ["n1"]) == {"n1": {"cpu": 25.0, "memory": 25.0}}
    assert herd_adjustments(cache, taken, ["n2"]) == {"n2": {"cpu": 25.0, "memory": 25.0}}


def test_adjustments_follow_deleted_pods_and_nodes_within_one_snapshot(
    cache: ClusterCache, clock: Clock
) -> None:
    taken = DecisionMemo(snapshot())
    placed(cache, clock, "a", READ_AT + 1)
    placed(cache, clock, "b", READ_AT + 2, "n2")
    assert set(herd_adjustments(cache, taken, ["n1", "n2"])) == {"n1", "n2"}
    cache.remove_pod("uid-a")
    assert herd_adjustments(cache, taken, ["n1", "n2"]) == {"n2": {"cpu": 25.0, "memory": 25.0}}
    cache.remove_node("n2")
    assert herd_adjustments(cache, taken, ["n1", "n2"]) == {}


def succeeded(memo: DecisionMemo, snapshot: Snapshot) -> DecisionMemo:
    return memo.succeeded_by(snapshot, memo.scores)


def test_the_next_snapshots_loads_are_those_worked_out_afresh(cache: ClusterCache, clock: Clock) -> None:
    cache.upsert_node(node("n3"))
    placed(cache, clock, "old", READ_AT - METRIC_LAG_SECONDS - 50, "n3")  # 10 s of the 1m rate unseen
    placed(cache, clock, "a", READ_AT - METRIC_LAG_SECONDS - 15)
    placed(cache, clock, "b", READ_AT + 1, "n2")
    first = DecisionMemo(snapshot())
    assert set(herd_adjustments(cache, first, ["n1", "n2", "n3"])) == {"n1", "n2", "n3"}
    # Read 20 s later: n3's placement is shown in full by then, n1's and n2's in part.
    later = snapshot(READ_AT + 20)
    following = succeeded(first, later)
    placed(cache, clock, "c", READ_AT + 21, "n3")  # placed since: worked out too
    expected = herd_adjustments(cache, DecisionMemo(later), ["n1", "n2", "n3"])
    assert set(expected) == {"n1", "n2", "n3"}
    assert herd_adjustments(cache, following, ["n1", "n2", "n3"]) == expected


def test_the_next_snapshot_works_out_only_the_nodes_with_recent_placements(
    cache: ClusterCache, clock: Clock
) -> None:
    placed(cache, clock, "a", READ_AT + 1)
    first = DecisionMemo(snapshot())
    herd_adjustments(cache, first, ["n1", "n2"])
    following = succeeded(first, snapshot(READ_AT + 20))
    assert following.herd.pending == {"n1"}
    assert following.herd.version == first.herd.version
    assert herd_adjustments(cache, following, ["n1", "n2"]) == {"n1": {"cpu": 25.0, "memory": 25.0}}


def test_windows_reaching_further_back_start_over(cache: ClusterCache, clock: Clock) -> None:
    placed(cache, clock, "a", READ_AT - METRIC_LAG_SECONDS - 90)  # shown in full by a 1m rate
    first = DecisionMemo(snapshot())
    assert herd_adjustments(cache, first, ["n1"]) == {}
    wider = snapshot(READ_AT + 1, cpu_range="5m")  # a changed plan: a 5m rate shows it in part
    following = succeeded(first, wider)
    assert following.herd.version == (0, 0)
    expected = herd_adjustments(cache, DecisionMemo(wider), ["n1"])
    assert set(expected) == {"n1"}
    assert herd_adjustments(cache, following, ["n1"]) == expected


def test_a_pod_found_long_running_adds_nothing(cache: ClusterCache) -> None:
    started = READ_AT - 3600
    cache.observe_pod(pod_info("old", node_name="n1", started_at=started, phase="Running"))
    assert cache.usage_of("n1").pods == 1
    assert herd_adjustments(cache, DecisionMemo(snapshot()), ["n1"]) == {}


def test_without_cpu_or_memory_plugins_nothing_is_adjusted(cache: ClusterCache, clock: Clock) -> None:
    disk_only = plan_from_policy(policy_spec({"name": "diskIO"}))
    placed(cache, clock, "a", READ_AT + 1)
    assert herd_adjustments(cache, DecisionMemo(Snapshot.empty(disk_only, READ_AT)), ["n1"]) == {}


def test_placements_are_remembered_as_long_as_the_longest_window_needs(cache: ClusterCache) -> None:
    assert herd_memory_seconds(plan("10m", "30m")) == METRIC_LAG_SECONDS + 1800
    # A counter rated "instantly" still uses a one-minute window.
    assert herd_memory_seconds(plan("0s", "0s")) == METRIC_LAG_SECONDS + 60


def test_deleted_and_finished_pods_weigh_no_more(cache: ClusterCache, clock: Clock) -> None:
    placed(cache, clock, "a", READ_AT + 1)
    placed(cache, clock, "b", READ_AT + 2, "n2")
    cache.observe_pod(pod_info("a", node_name="n1", phase="Running"))
    cache.observe_pod(pod_info("b", node_name="n2", phase="Running"))
    assert set(herd_adjustments(cache, DecisionMemo(snapshot()), ["n1", "n2"])) == {"n1", "n2"}
    cache.remove_pod("uid-a")
    cache.observe_pod(pod_info("b", node_name="n2", phase="Succeeded"))
    assert herd_adjustments(cache, DecisionMemo(snapshot()), ["n1", "n2"]) == {}


def test_the_node_mixin_cpu_rule_shows_a_placement_over_its_5m_rate_and_the_time_range() -> None:
    """source RecordingRules: the rule is a 5m rate, averaged over timeRange, so a pod's load takes
    both to show in full; memory's rule is an instant ratio."""
    rules = plan_from_policy(
        policy_spec(
            {"name": "cpu", "timeRange": "1m", "source": "RecordingRules"},
            {"name": "memory", "timeRange": "0s", "source": "RecordingRules"},
        )
    )
    assert herd_memory_seconds(rules) == METRIC_LAG_SECONDS + 60 + 300
