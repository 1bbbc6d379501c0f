"""Preemption candidates as kube-scheduler's DefaultPreemption chooses them: the victims on one node
(SelectVictimsOnNode) and the node among candidates (pickOneNodeForPreemption), criterion by criterion."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.preemption_candidates import NO_VICTIMS, Candidate, pick_one, select_victims
from promsched.scheduling.filters import DEFAULT_FILTERS
from promsched.scheduling.framework import Status
from promsched.scheduling.objects.disruption_budgets import DisruptionBudget, split_by_violation
from promsched.scheduling.objects.pods import PodInfo
from support.objects import node, pod, pod_info, pod_object
from support.placement import cache_with

NOW = 1_800_000_000.0


def budget(
    name: str, allowed: int, *, namespace: str = "ns", disrupted: tuple[str, ...] = (), **labels: str
) -> DisruptionBudget:
    selector: dict[str, Any] | None = {"matchLabels": labels} if labels else {}
    return DisruptionBudget.from_object(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": dict.fromkeys(disrupted, "T")},
        }
    )


def running(name: str, priority: int, cpu: str = "1", **options: Any) -> PodInfo:
    return pod(name, node_name="n1", cpu=cpu, priority=priority, **options)


def started(name: str, priority: int, start: str) -> PodInfo:
    obj = pod_object(name, node_name="n1", cpu="1", priority=priority)
    obj["status"]["startTime"] = start
    return PodInfo.from_object(obj)


def victims_of(incoming: PodInfo, cache: ClusterCache, *budgets: DisruptionBudget) -> Candidate | Status:
    return select_victims(incoming, cache.nodes["n1"], cache, DEFAULT_FILTERS, (), budgets, NOW)


def names(candidate: Candidate | Status) -> list[str]:
    assert isinstance(candidate, Candidate), candidate
    return [victim.name for victim in candidate.victims]


# ----- victims on one node -------------------------------------------------------------------------


def test_as_many_as_possible_are_reprieved_the_most_important_first() -> None:
    cache = cache_with([node("n1", cpu="4")], [running("p1", 1), running("p2", 2), running("p3", 3, cpu="2")])
    candidate = victims_of(pod("urgent", cpu="1", priority=10), cache)
    # p3 and p2 are reprieved in turn; p1 is what must go.
    assert names(candidate) == ["p1"]
    # The node is as it was.
    assert cache.usage_of("n1").pods == 3


def test_pods_of_equal_priority_are_reprieved_longest_running_first() -> None:
    cache = cache_with(
        [node("n1", cpu="2")],
        [
            started("young", 1, "2026-01-02T00:00:00Z"),
            running("old", 1),
        ],
    )
    assert names(victims_of(pod("urgent", cpu="1", priority=10), cache)) == ["young"]


def test_victims_whose_eviction_would_violate_a_budget_are_reprieved_first() -> None:
    guarded = {"app": "guarded"}
    cache = cache_with([node("n1", cpu="2")], [running("free", 1), running("kept", 1, labels=guarded)])
    candidate = victims_of(pod("urgent", cpu="1", priority=10), cache, budget("pdb", 0, **guarded))
    assert names(candidate) == ["free"]
    assert isinstance(candidate, Candidate)
    assert candidate.pdb_violations == 0


def test_a_victim_that_violates_a_budget_is_counted_and_victims_stay_most_important_first() -> None:
    guarded = {"app": "guarded"}
    cache = cache_with(
        [node("n1", cpu="3")], [running("low", 1), running("guarded", 5, labels=guarded), running("mid", 3)]
    )
    candidate = victims_of(pod("urgent", cpu="3", priority=10), cache, budget("pdb", 0, **guarded))
    assert names(candidate) == ["guarded", "mid", "low"]
    assert isinstance(candidate, Candidate)
    assert candidate.pdb_violations == 1


def test_a_node_without_lower_priority_pods_has_no_victims() -> None:
    cache = cache_with([node("n1", cpu="2")], [running("peer", 10, cpu="2")])
    assert victims_of(pod("urgent", cpu="1", priority=10), cache) is NO_VICTIMS


def test_a_node_too_small_even_without_its_victims_says_why() -> None:
    cache = cache_with([node("n1", cpu="2")], [running("low", 1)])
    status = victims_of(pod("huge", cpu="3", priority=10), cache)
    assert isinstance(status, Status)
    assert status.reason == "Insufficient cpu"
    assert cache.usage_of("n1").pods == 1


def test_a_nominated_pod_of_higher_priority_keeps_its_room_during_the_dry_run() -> None:
    cache = cache_with([node("n1", cpu="2")], [running("low", 1, cpu="2")])
    cache.nominate(pod("first", cpu="1", priority=100), "n1")
    # Evicting `low` leaves 2 CPUs, one of them held for `first`: two are not to be had.
    status = victims_of(pod("urgent", cpu="2", priority=50), cache)
    assert isinstance(status, Status)
    assert status.reason == "Insufficient cpu"
    assert names(victims_of(pod("urgent", cpu="1", priority=50), cache)) == ["low"]


# ----- PodDisruptionBudgets --------------------------------------------------------------------------


def test_each_pod_takes_one_disruption_from_every_budget_that_covers_it() -> None:
    pods = [pod_info(f"p{index}", labels={"app": "a"}) for index in range(3)]
    violating, fine = split_by_violation(pods, [budget("pdb", 2, app="a")])
    assert [p.name for p in fine] == ["p0", "p1"]
    assert [p.name for p in violating] == ["p2"]


@pytest.mark.parametrize(
    ("covering", "why"),
    [
        (budget("pdb", 0), "an empty selector matches no pod (kube's preemption)"),
        (budget("pdb", 0, namespace="other", app="a"), "another namespace"),
        (budget("pdb", 0, app="b"), "another app"),
        (budget("pdb", 0, disrupted=("p0",), app="a"), "already counted by the API server"),
    ],
)
def test_budgets_that_do_not_cover_a_pod_leave_it_free(covering: DisruptionBudget, why: str) -> None:
    violating, fine = split_by_violation([pod_info("p0", labels={"app": "a"})], [covering])
    assert (violating, [p.name for p in fine]) == ([], ["p0"]), why


def test_a_pod_without_labels_matches_no_budget() -> None:
    violating, _ = split_by_violation([pod_info("bare")], [budget("pdb", 0, app="a")])
    assert violating == []


def test_a_budget_with_an_unreadable_selector_matches_nothing() -> None:
    broken = DisruptionBudget.from_object(
        {
            "metadata": {"name": "pdb", "namespace": "ns"},
            "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    assert not broken.covers(pod_info("p0", labels={"app": "a"}))


# ----- the node to preempt on ------------------------------------------------------------------------


def victim(name: str, priority: int, started: float | None = NOW - 100.0) -> PodInfo:
    return pod_info(name, priority=priority, started_at=started)


def candidate(node_name: str, *victims: PodInfo, violations: int = 0) -> Candidate:
    return Candidate(node_name, victims, violations)


def picked(*candidates: Candidate) -> str:
    return pick_one(candidates, NOW).node


def test_the_fewest_pdb_violations_win_first() -> None:
    assert picked(candidate("a", victim("x", 1), violations=1), candidate("b", victim("y", 100))) == "b"


def test_then_the_lowest_highest_victim_priority() -> None:
    lower = candidate("b", victim("y", 5), victim("z", 5), victim("w", 5))
    assert picked(candidate("a", victim("x", 10)), lower) == "b"


def test_then_the_smallest_sum_of_priorities() -> None:
    assert (
        picked(
            candidate("a", victim("x", 10), victim("y", 5)), candidate("b", victim("z", 10), victim("w", 1))
        )
        == "b"
    )


def test_the_sum_counts_negative_priorities_so_that_more_victims_never_sum_lower() -> None:
    fewer = candidate("b", victim("z", -5))
    assert picked(candidate("a", victim("x", -5), victim("y", -5)), fewer) == "b"


def test_then_the_fewest_victims() -> None:
    # The lowest priority there is adds nothing to the sum (kube adds MaxInt32+1 to each): the sums tie.
    lowest = -(2**31)
    assert picked(candidate("a", victim("x", 3), victim("y", lowest)), candidate("b", victim("z", 3))) == "b"


def test_then_the_latest_start_of_the_highest_priority_victims() -> None:
    early = candidate("a", victim("x", 3, started=NOW - 500), victim("y", 1, started=NOW - 1))
    late = candidate("b", victim("z", 3, started=NOW - 50), victim("w", 1, started=NOW - 900))
    assert picked(early, late) == "b"
    # A victim not started yet counts as starting now: the latest of all.
    assert picked(late, candidate("c", victim("v", 3, started=None), victim("u", 1))) == "c"


def test_the_earliest_start_among_the_highest_priority_victims_is_what_counts() -> None:
    mixed = candidate("a", victim("x", 3, started=NOW - 10), victim("y", 3, started=NOW - 400))
    steady = candidate("b", victim("z", 3, started=NOW - 300), victim("w", 3, started=NOW - 300))
    assert picked(mixed, steady) == "b"


def test_past_every_criterion_the_first_candidate() -> None:
    assert picked(candidate("a", victim("x", 3)), candidate("b", victim("y", 3))) == "a"
    assert picked(candidate("b", victim("y", 3)), candidate("a", victim("x", 3))) == "b"


def test_a_single_candidate_is_taken() -> None:
    assert picked(candidate("only", victim("x", 3), violations=2)) == "only"
