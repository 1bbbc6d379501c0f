"""Whether preemption would help a pod that fits nowhere. promsched never evicts pods; it says so.

As kube-scheduler's DefaultPreemption judges candidates: only nodes that failed for a reason evicting
pods can lift (resources, ports, anti-affinity, spreading; not taints or node affinity), with every
pod of lower priority than the pod's taken away, on that node and in what the cluster filters
prepared (kube's PreFilter RemovePod), and all filters run again. A pod whose preemptionPolicy is Never
may not preempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from promsched.metrics.scoring import ScoreMemo, score_nodes
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.filters import Filter, run_checks, run_filters
from promsched.scheduling.filters.checks import NodeCheck
from promsched.scheduling.filters.statuses import Status
from promsched.scheduling.pods import PREEMPT_NEVER, PodInfo

NOT_DONE: Final = "promsched does not preempt lower-priority pods"


def nodes_freed_by_preemption(
    pod: PodInfo,
    cache: ClusterCache,
    snapshot: Snapshot,
    failed: Sequence[tuple[str, Status]],
    filters: Sequence[Filter],
    checks: Sequence[NodeCheck],
    scores: ScoreMemo | None = None,
) -> int:
    """How many of the `failed` nodes ((node, rejection) pairs) would fit `pod` once their lower-priority
    pods were evicted."""
    if pod.preemption_policy == PREEMPT_NEVER:
        return 0
    freed = 0
    for name, status in failed:
        node = cache.nodes[name]
        victims = [other for other in cache.node_pods.get(name, {}).values() if other.priority < pod.priority]
        if not victims or not status.eviction_may_help:
            continue
        usage = cache.usage_of(name).without(victims)
        for check in checks:
            for victim in victims:
                check.remove_pod(victim, node)
        try:
            fits = run_filters(pod, node, usage, filters) is None and run_checks(node, checks) is None
        finally:
            for check in checks:
                for victim in victims:
                    check.add_pod(victim, node)
        # Load thresholds are judged on metrics, which no eviction changes until the next snapshot.
        if fits and score_nodes(snapshot, [name], memo=scores)[0].feasible:
            freed += 1
    return freed


def preemption_note(freed: int) -> str:
    """What FailedScheduling adds, after kube's text, when evictions would have made room."""
    return f" preemption: {NOT_DONE} (evicting some would make room on {freed} node(s))."
