"""Preemption for a pod that fits nowhere (kube-scheduler's DefaultPreemption PostFilter): whether it
may preempt, the candidate nodes, and the one to preempt on, or kube's words for why there is none.

Only nodes that failed for a reason evicting pods can lift (the filter's Unschedulable code: resources,
ports, anti-affinity, spreading; not taints or node affinity) are dry-run, from a random offset and up
to kube's number of candidates (10% of them, at least 100). A pod whose preemptionPolicy is Never may
not preempt, nor may one whose nominated node still has lower-priority pods terminating from an
earlier preemption. Load is judged as placement judges it (the herd load and the pod's own estimate
against the thresholds) on metrics, which no eviction changes until the next snapshot: a candidate must
pass as it stands, since kube never preempts on a node the pod would still not fit. This module
decides; `evicting` acts.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.memos import DecisionMemo
from promsched.scheduling.cycle.preemption_candidates import (
    NO_VICTIMS,
    Candidate,
    Evictable,
    may_preempt,
    pick_one,
    select_victims,
)
from promsched.scheduling.filters import summarize_failures
from promsched.scheduling.framework import Code, Filter, NodeCheck, Status
from promsched.scheduling.objects.pods import PREEMPT_NEVER, PodInfo

NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"
NEVER: Final = "not eligible due to preemptionPolicy=Never."
TERMINATING: Final = "not eligible due to a terminating pod on the nominated node."
# kube's DefaultPreemptionArgs defaults: minCandidateNodesPercentage and minCandidateNodesAbsolute.
MIN_CANDIDATE_NODES_PERCENT: Final = 10
MIN_CANDIDATE_NODES: Final = 100


@dataclass(frozen=True, slots=True)
class Preemption:
    """What preemption concluded: `candidate`, the node and victims to preempt, if any; `message`, kube's
    text after "preemption: " (where it found a placement, or why it found none); `clear_nomination`
    when the pod's nominated node is to be cleared (no candidate was found)."""

    candidate: Candidate | None = None
    message: str = ""
    clear_nomination: bool = False

    def note(self) -> str:
        """What FailedScheduling adds after the filters' text, as kube 1.37's FitError writes it."""
        return f" preemption: {self.message}" if self.message else ""


def nominated_node(pod: PodInfo, cache: ClusterCache) -> str:
    """Where the pod is nominated: as held in memory, else as its status says."""
    return cache.nominations.get(pod.uid) or pod.nominated_node_name


def ineligibility(
    pod: PodInfo, cache: ClusterCache, statuses: dict[str, Status], evictable: Evictable | None = None
) -> str:
    """Why `pod` may not preempt ('' when it may), as kube's PodEligibleToPreemptOthers."""
    if pod.preemption_policy == PREEMPT_NEVER:
        return NEVER
    node = nominated_node(pod, cache)
    if not node:
        return ""
    status = statuses.get(node)
    # A nominated node no eviction can free (or one not judged: not in the map) is given up on.
    if status is None or status.code is Code.UNRESOLVABLE:
        return ""
    for other in cache.node_pods.get(node, {}).values():
        if may_preempt(pod, other, evictable) and _terminating_by_preemption(other, cache):
            return TERMINATING
    return ""


def _terminating_by_preemption(pod: PodInfo, cache: ClusterCache) -> bool:
    """Marked so by a scheduler (kube's check), or evicted by promsched's own preemption, whose mark the
    Eviction API overwrites."""
    return pod.terminating_by_preemption or (pod.deletion_timestamp and pod.uid in cache.preempted)


def candidates_to_find(potential: int) -> int:
    """kube's calculateNumCandidates."""
    wanted = max(potential * MIN_CANDIDATE_NODES_PERCENT // 100, MIN_CANDIDATE_NODES)
    return min(wanted, potential)


def preempt(
    pod: PodInfo,
    cache: ClusterCache,
    memo: DecisionMemo,
    failed: Sequence[tuple[str, Status]],
    filters: Sequence[Filter],
    checks: Sequence[NodeCheck],
    *,
    rng: random.Random | None = None,
    evictable: Evictable | None = None,
) -> Preemption:
    """Preemption for `pod`, which fits none of the cache's nodes, judged with the decision's `memo`;
    `failed` holds each node a filter rejected, with its rejection (nodes missing from it were never
    judged by the filters, or passed them and failed a load threshold)."""
    total = len(cache.nodes)
    statuses = dict(failed)
    reason = ineligibility(pod, cache, statuses, evictable)
    if reason:
        return Preemption(message=reason)
    potential = [name for name, status in failed if status.eviction_may_help and name in cache.nodes]
    wanted = candidates_to_find(len(potential))
    offset = (rng or random.Random()).randrange(len(potential)) if potential else 0
    budgets = list(cache.budgets.values())
    now = time.time()
    found: list[Candidate] = []
    violating: list[Candidate] = []
    reasons: Counter[str] = Counter()
    incoming = memo.incoming_load(pod, cache) if potential else None
    for index in range(len(potential)):
        name = potential[(offset + index) % len(potential)]
        result = select_victims(pod, cache.nodes[name], cache, filters, checks, budgets, now, evictable)
        if isinstance(result, Status):
            reasons[result.reason] += 1
            continue
        [judged] = memo.judge_load(cache, [name], incoming)
        if not result.victims or not judged.feasible:
            reasons[judged.reasons[0].key if judged.reasons else NO_VICTIMS.reason] += 1
            continue
        (violating if result.pdb_violations else found).append(result)
        if found and len(found) + len(violating) >= wanted:
            break  # kube stops the dry run once enough candidates, one of them violating nothing
    candidates = found + violating
    if not candidates:
        reasons[NOT_HELPFUL] += total - sum(reasons.values())
        return Preemption(message=summarize_failures(total, reasons), clear_nomination=True)
    best = pick_one(candidates, now)
    return Preemption(best, f"found a potential placement for pod on node {best.node}, {_victims(best)}")


def _victims(candidate: Candidate) -> str:
    # kube's wording, "1 victims" included.
    return f"preempting {len(candidate.victims)} victims"
