"""Preemption as decided in a scheduling cycle: who may preempt, where, and kube's words when nowhere."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from promsched.metrics import Snapshot, plan_from_policy
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import decide
from promsched.scheduling.cycle.preempting import NEVER, TERMINATING, candidates_to_find
from promsched.scheduling.intake.kinds import DISRUPTION_BUDGETS
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.schedulers import Scheduler
from support.fake_apis import FakeSender
from support.objects import ZONE, node, pod, pod_object
from support.placement import anti_affinity, cache_with, decide_evenly, required_term
from support.policies import policy_spec
from support.preemption import found, no_victims, not_helpful, preemption_note
from support.snapshots import snapshot_of

TWO_NODES = [node("n1", cpu="2"), node("n2", cpu="2")]
TWO_NODES_OF_4 = [node("n1"), node("n2")]
INSUFFICIENT = "0/2 nodes are available: 2 Insufficient cpu."
PREEMPTED = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}


def big(name: str, priority: int, node_name: str = "", **spec: Any) -> PodInfo:
    return pod(name, cpu="1500m", node_name=node_name, priority=priority, **spec)


def full(nodes: list[NodeInfo], priority: int) -> list[PodInfo]:
    return [big(f"low-{info.name}", priority, info.name) for info in nodes]


def preempted(name: str, node_name: str) -> PodInfo:
    """A victim of an earlier preemption, still terminating."""
    obj = pod_object(name, cpu="1500m", node_name=node_name, deleting=True)
    obj["status"]["conditions"] = [PREEMPTED]
    return PodInfo.from_object(obj)


def nominated(cache: ClusterCache, incoming: PodInfo, node_name: str) -> PodInfo:
    cache.nominate(incoming, node_name)
    return incoming


def test_a_pod_that_evictions_fit_gets_a_candidate_and_kubes_message_naming_it() -> None:
    outcome = decide_evenly(big("urgent", 1000), cache_with(TWO_NODES, full(TWO_NODES, 0)))
    assert outcome.node is None
    candidate = outcome.preemption.candidate
    assert candidate is not None
    # kube 1.37's PostFilter reports its success after the filters' text.
    assert outcome.message == INSUFFICIENT + found(candidate.node, 1)
    assert [victim.name for victim in candidate.victims] == [f"low-{candidate.node}"]
    assert candidate.pdb_violations == 0


def test_pods_of_equal_or_higher_priority_are_no_victims() -> None:
    outcome = decide_evenly(big("peer", 0), cache_with(TWO_NODES, full(TWO_NODES, 0)))
    assert outcome.message == INSUFFICIENT + no_victims(2)
    assert outcome.preemption.candidate is None
    assert outcome.preemption.clear_nomination


def test_a_pod_that_may_not_preempt_says_so_in_kubes_words() -> None:
    polite = big("polite", 1000, preemptionPolicy="Never")
    outcome = decide_evenly(polite, cache_with(TWO_NODES, full(TWO_NODES, 0)))
    assert outcome.message == INSUFFICIENT + preemption_note(NEVER)
    assert outcome.message.endswith(" preemption: not eligible due to preemptionPolicy=Never.")
    assert outcome.preemption.candidate is None
    assert not outcome.preemption.clear_nomination  # kube keeps the nomination as it is


def test_evictions_cannot_lift_node_affinity() -> None:
    pinned = big("pinned", 1000, nodeSelector={"kubernetes.io/hostname": "n1"})
    cache = cache_with(TWO_NODES, [*full(TWO_NODES[:1], 0), big("high-n2", 2000, "n2")])
    outcome = decide_evenly(pinned, cache)
    filtered = (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector."
    )
    assert outcome.message == filtered + found("n1", 1)
    assert outcome.preemption.candidate is not None
    assert outcome.preemption.candidate.node == "n1"
    # At priority 0 nothing on n1 may go, and n2 fails for a reason no eviction lifts.
    peer = decide_evenly(big("pinned", 0, nodeSelector={"kubernetes.io/hostname": "n1"}), cache)
    assert peer.message == filtered + preemption_note(
        "0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )


def test_a_node_still_too_small_without_its_victims_reports_the_filters_reason() -> None:
    cache = cache_with(TWO_NODES, [big("low-n1", 0, "n1"), big("high-n2", 2000, "n2")])
    outcome = decide_evenly(pod("huge", cpu="3", priority=1000), cache)
    assert outcome.message == INSUFFICIENT + preemption_note(
        "0/2 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming pod."
    )


def test_a_rejection_before_any_node_is_not_helped_by_preemption() -> None:
    claimed = pod("app", priority=1000, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "x"}}])
    outcome = decide_evenly(claimed, cache_with(TWO_NODES))
    assert outcome.message == (
        '0/2 nodes are available: persistentvolumeclaim "x" not found.' + not_helpful(2)
    )


def test_evicting_lower_priority_pods_that_repel_is_judged_node_by_node() -> None:
    web = {"app": "web"}
    blockers = [pod(f"web-{info.name}", labels=web, node_name=info.name, priority=5) for info in TWO_NODES]
    cache = cache_with(TWO_NODES, blockers)
    apart = pod("web-new", labels=web, priority=10, affinity=anti_affinity(required_term(web)))
    reason = "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    outcome = decide_evenly(apart, cache)
    assert outcome.preemption.candidate is not None
    assert outcome.message == reason + found(outcome.preemption.candidate.node, 1)
    # Both nodes are in one zone: evicting one node's pod leaves the other's there, so no node frees up
    # (and the pod taken away while judging n1 is back when n2 is judged).
    zone_apart = pod("web-new", labels=web, priority=10, affinity=anti_affinity(required_term(web, ZONE)))
    assert decide_evenly(zone_apart, cache).message == reason + preemption_note(
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    )
    assert cache.usage_of("n1").pods == cache.usage_of("n2").pods == 1


def test_a_pod_whose_nominated_node_still_has_preempted_pods_terminating_waits() -> None:
    terminating = preempted("low-n1", "n1")
    cache = cache_with(TWO_NODES, [terminating, big("low-n2", 0, "n2")])
    urgent = nominated(cache, big("urgent", 1000), "n1")
    outcome = decide_evenly(urgent, cache)
    assert outcome.message == INSUFFICIENT + preemption_note(TERMINATING)
    assert outcome.preemption.candidate is None
    # Once the victim is gone, the nominated node is tried first and taken.
    cache.remove_pod(terminating.uid)
    assert decide_evenly(urgent, cache).node == "n1"


def test_pods_nominated_to_a_node_keep_pods_of_lower_or_equal_priority_off_its_room() -> None:
    cache = cache_with([node("n1", cpu="2")])
    nominated(cache, pod("holder", cpu="1500m", priority=100), "n1")
    assert decide_evenly(pod("lower", cpu="1", priority=10), cache).message == (
        "0/1 nodes are available: 1 Insufficient cpu." + no_victims(1)
    )
    assert decide_evenly(pod("equal", cpu="1", priority=100), cache).node is None
    # A pod of higher priority does not yield to it; the nominated pod itself is not counted twice.
    assert decide_evenly(pod("higher", cpu="1", priority=1000), cache).node == "n1"
    assert decide_evenly(pod("holder", cpu="1500m", priority=100), cache).node == "n1"


def test_the_nominated_node_is_taken_when_the_pod_fits_there_whatever_the_scores() -> None:
    cache = cache_with([node("n1"), node("n2"), node("n3")])
    urgent = nominated(cache, pod("urgent", priority=1000), "n3")
    for _ in range(5):
        assert decide_evenly(urgent, cache).node == "n3"


def test_candidates_are_dry_run_up_to_kubes_number() -> None:
    assert [candidates_to_find(n) for n in (1, 50, 100, 999, 1000, 5000)] == [1, 50, 100, 100, 100, 500]


def test_disruption_budgets_are_watched_into_the_cache() -> None:
    scheduler = Scheduler(FakeSender())
    pdb = {
        "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "3"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 1, "disruptedPods": {"web-0": "2026-01-01T00:00:00Z"}},
    }
    scheduler.intake.on_event(DISRUPTION_BUDGETS, "ADDED", pdb)
    [budget] = scheduler.cache.budgets.values()
    assert (budget.name, budget.disruptions_allowed, budget.disrupted_pods) == (
        "web",
        1,
        frozenset({"web-0"}),
    )
    scheduler.intake.on_event(
        DISRUPTION_BUDGETS, "DELETED", {**pdb, "metadata": {**pdb["metadata"], "resourceVersion": "4"}}
    )
    assert scheduler.cache.budgets == {}


def test_only_evictable_pods_are_victims() -> None:
    cache = cache_with(
        TWO_NODES, [big("low-n1", 0, "n1"), pod("other", "team-b", cpu="1500m", node_name="n2")]
    )
    outcome = decide_evenly(big("urgent", 1000), cache, evictable=lambda victim: victim.namespace == "ns")
    assert outcome.preemption.candidate is not None
    assert [victim.name for victim in outcome.preemption.candidate.victims] == ["low-n1"]
    nowhere = decide_evenly(big("urgent", 1000), cache, evictable=lambda victim: False)
    assert nowhere.message == INSUFFICIENT + no_victims(2)


def test_victims_of_promsched_terminating_under_the_eviction_apis_own_mark_hold_the_pod_back() -> None:
    # The Eviction API replaces DisruptionTarget's reason with EvictionByEvictionAPI.
    evicted = pod_object("low-n1", cpu="1500m", node_name="n1", deleting=True)
    evicted["status"]["conditions"] = [{**PREEMPTED, "reason": "EvictionByEvictionAPI"}]
    cache = cache_with(TWO_NODES, [PodInfo.from_object(evicted), big("low-n2", 0, "n2")])
    urgent = nominated(cache, big("urgent", 1000), "n1")
    # Evicted by someone else (a drain): not preemption's, so the pod may preempt again.
    assert decide_evenly(urgent, cache).preemption.candidate is not None
    cache.preempted.add("uid-low-n1")
    assert decide_evenly(urgent, cache).message == INSUFFICIENT + preemption_note(TERMINATING)
    cache.remove_pod("uid-low-n1")
    assert cache.preempted == set()


def cpu_threshold_snapshot(threshold: float, loads: dict[str, float]) -> Snapshot:
    return snapshot_of(
        plan_from_policy(policy_spec({"name": "cpu", "threshold": threshold})), {"cpu": loads}, time.time()
    )


@pytest.mark.parametrize(("threshold", "preempts"), [(70, False), (90, True)])
def test_no_victims_on_a_node_whose_threshold_keeps_the_pod_out_with_its_own_load(
    threshold: float, preempts: bool
) -> None:
    """Two full nodes at 60% cpu; the preemptor's 1 cpu is 25% of either. With a threshold of 70 it
    would not go to a node once its victims were gone (85%), so none is evicted on either."""
    cache = cache_with(
        TWO_NODES_OF_4, [pod(f"low-{name}", cpu="3500m", node_name=name) for name in ("n1", "n2")]
    )
    snapshot = cpu_threshold_snapshot(threshold, {"n1": 60.0, "n2": 60.0})
    outcome = decide(pod("urgent", cpu="1", priority=1000), cache, snapshot, rng=random.Random(1))
    assert outcome.node is None
    candidate = outcome.preemption.candidate
    if preempts:
        assert candidate is not None
        assert outcome.message == INSUFFICIENT + found(candidate.node, 1)
    else:
        assert candidate is None
        assert outcome.preemption.clear_nomination
        assert outcome.message == INSUFFICIENT + preemption_note(
            "0/2 nodes are available: 2 cpu load above 70%."
        )


def test_the_herd_load_of_pods_placed_since_the_metrics_counts_against_a_candidates_threshold() -> None:
    """n1 shows 30% cpu, but a pod placed there a moment ago (that may not be evicted) adds 25%, and the
    preemptor another 25%: 80% is past the threshold of 70."""
    cache = cache_with([node("n1")], [pod("low", cpu="3500m", node_name="n1")])
    snapshot = cpu_threshold_snapshot(70, {"n1": 30.0})
    urgent = pod("urgent", cpu="1", priority=1000)
    assert decide(urgent, cache, snapshot, rng=random.Random(1)).preemption.candidate is not None
    cache.assume(pod("high", cpu="1", priority=2000), "n1")
    outcome = decide(urgent, cache, snapshot, rng=random.Random(1))
    assert outcome.preemption.candidate is None
    assert outcome.message == "0/1 nodes are available: 1 Insufficient cpu." + preemption_note(
        "0/1 nodes are available: 1 cpu load above 70%."
    )
