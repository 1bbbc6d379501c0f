"""Preemption candidates: the victims each node would give up, and the node to preempt on.

As kube-scheduler's DefaultPreemption. On one node (SelectVictimsOnNode): take away every pod of
lower priority than the preemptor, check that it then fits, and reprieve as many as possible, most
important first, the ones whose eviction would violate a PodDisruptionBudget before the others; what
cannot be reprieved are the victims. Among the candidate nodes (pickOneNodeForPreemption): fewest PDB
violations, then the lowest highest-victim priority, the smallest sum of victim priorities, the fewest
victims, the latest start of the highest-priority victims, then the first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.nominations import filter_node, nominated_before
from promsched.scheduling.framework import ClusterEvent, Code, Filter, NodeCheck, Status
from promsched.scheduling.objects.disruption_budgets import DisruptionBudget, split_by_violation
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

NO_VICTIMS: Final = Status(
    "No preemption victims found for incoming pod", Code.UNRESOLVABLE, ClusterEvent.NONE
)
# Which pods may be victims besides having a lower priority (kube's IsEligiblePod): promsched's own
# evictions are limited to the namespaces it may write to.
Evictable = Callable[[PodInfo], bool]
# Added to every priority before summing (kube: MaxInt32+1), so that more victims never sum lower.
_PRIORITY_OFFSET: Final = 2**31


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node the preemptor would fit once `victims` (most important first) were gone."""

    node: str
    victims: tuple[PodInfo, ...]
    pdb_violations: int


def importance(now: float) -> Callable[[PodInfo], tuple[int, float]]:
    """Sort key, most important first (kube's MoreImportantPod): higher priority, then the longer
    running; a pod not started yet counts as starting `now`."""
    return lambda pod: (-pod.priority, _started(pod, now))


def _started(pod: PodInfo, now: float) -> float:
    return now if pod.started_at is None else pod.started_at


def may_preempt(pod: PodInfo, other: PodInfo, evictable: Evictable | None) -> bool:
    """kube's isPreemptionAllowed: a lower priority, and whatever `evictable` (its IsEligiblePod) adds."""
    return other.priority < pod.priority and (evictable is None or evictable(other))


def select_victims(
    pod: PodInfo,
    node: NodeInfo,
    cache: ClusterCache,
    filters: Sequence[Filter],
    checks: Sequence[NodeCheck],
    budgets: Iterable[DisruptionBudget],
    now: float | None = None,
    evictable: Evictable | None = None,
) -> Candidate | Status:
    """The fewest victims on `node` that let `pod` fit, or why no eviction there makes it fit. The
    cache and the checks are left as they were found."""
    now = time.time() if now is None else now
    potential = sorted(
        (
            other
            for other in cache.node_pods.get(node.name, {}).values()
            if may_preempt(pod, other, evictable)
        ),
        key=importance(now),
    )
    if not potential:
        return NO_VICTIMS
    nominated = nominated_before(pod, cache, node.name)
    usage = cache.usage_of(node.name).without(potential)
    removed = set()
    for victim in potential:
        _remove(victim, node, checks)
        removed.add(victim.uid)
    try:
        status = filter_node(pod, node, usage, filters, checks, nominated)
        if status is not None:
            return status
        violating, non_violating = split_by_violation(potential, budgets)
        victims: list[PodInfo] = []
        violations = 0
        for group in (violating, non_violating):
            for victim in group:
                usage.add(victim)
                for check in checks:
                    check.add_pod(victim, node)
                removed.discard(victim.uid)
                if filter_node(pod, node, usage, filters, checks, nominated) is None:
                    continue  # reprieved
                usage.remove(victim)
                _remove(victim, node, checks)
                removed.add(victim.uid)
                victims.append(victim)
                violations += group is violating
        if violating and non_violating:
            victims.sort(key=importance(now))
        return Candidate(node.name, tuple(victims), violations)
    finally:
        for victim in potential:
            if victim.uid in removed:
                for check in checks:
                    check.add_pod(victim, node)


def _remove(victim: PodInfo, node: NodeInfo, checks: Sequence[NodeCheck]) -> None:
    for check in checks:
        check.remove_pod(victim, node)


def pick_one(candidates: Sequence[Candidate], now: float | None = None) -> Candidate:
    """kube's pickOneNodeForPreemption: each criterion in turn keeps the best-scoring candidates, until
    one is left; past the last, the first of them."""
    now = time.time() if now is None else now

    def latest_start(candidate: Candidate) -> float:
        top = candidate.victims[0].priority
        return min(_started(victim, now) for victim in candidate.victims if victim.priority == top)

    # Higher scores are better.
    criteria: tuple[Callable[[Candidate], float], ...] = (
        lambda candidate: -candidate.pdb_violations,
        lambda candidate: -candidate.victims[0].priority,
        lambda candidate: -sum(victim.priority + _PRIORITY_OFFSET for victim in candidate.victims),
        lambda candidate: -len(candidate.victims),
        latest_start,
    )
    remaining = list(candidates)
    for criterion in criteria:
        if len(remaining) == 1:
            break
        scores = [criterion(candidate) for candidate in remaining]
        best = max(scores)
        remaining = [candidate for candidate, score in zip(remaining, scores, strict=True) if score == best]
    return remaining[0]
