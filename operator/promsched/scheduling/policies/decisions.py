"""What a decision's record holds (`status.lastDecision`, `status.decisions`): the first nodes of its
ranking, the filters' counts and the pod's estimate, built only when a status shows it."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from promsched.api.statuses import Decision, FilteredCount
from promsched.metrics.scoring import NodeResult
from promsched.scheduling import telemetry
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import Outcome
from promsched.scheduling.policies.recording import LazyDecision
from promsched.scheduling.policies.runtimes import PolicyRuntime
from promsched.scheduling.queues import QueuedPod

TOP_NODES = 3
# What status.lastDecision.topNodes[].plugins holds: the policy's up to 20 plugins. Placement
# preferences follow them and are left out of the status (not of the annotation) past that.
PLUGINS_SHOWN = 20


def shown(outcome: Outcome) -> tuple[NodeResult, ...]:
    """The nodes a decision's record shows: the first TOP_NODES of the ranking with the chosen node
    first (among equal totals the choice is random, so it may rank past them). A record keeps these
    alone, not the ranking of hundreds of nodes."""
    top = tuple(outcome.ranked[:TOP_NODES])
    chosen = next((result for result in outcome.ranked if result.node == outcome.node), None)
    if chosen is None:
        return top
    return (chosen, *(result for result in top if result is not chosen))[:TOP_NODES]


def decision_record(
    entry: QueuedPod, runtime: PolicyRuntime, outcome: Outcome, cache: ClusterCache, now: float
) -> LazyDecision:
    """The decision's record, built when the status shows it from what holds `now` (the queue's clock);
    the pod's usage estimate is made at once (the annotation holds it) and counted by its source."""
    policy = runtime.policy
    assert policy is not None
    estimate = runtime.memo.estimates_for(cache).of(entry.pod) if runtime.memo else None
    if estimate is not None:
        telemetry.pod_estimates.labels(runtime.name, "cpu", estimate.cpu.source.value).inc()
        telemetry.pod_estimates.labels(runtime.name, "memory", estimate.memory.source.value).inc()
    usage = estimate.to_api() if estimate is not None else None
    decided_at = time.time()
    latency_ms = max(0.0, (now - entry.added_at) * 1000.0)
    generation, mode = policy.generation, policy.spec.mode
    node, top, filtered_by, pod = outcome.node, shown(outcome), outcome.filtered, entry.pod.key

    def build() -> Decision:
        filtered = sorted(filtered_by.items(), key=lambda item: -item[1])[:32]
        return Decision(
            pod=pod,
            node=node,
            time=datetime.fromtimestamp(decided_at, UTC),
            latency_ms=latency_ms,
            generation=generation,
            mode=mode,
            top_nodes=[result._replace(plugins=result.plugins[:PLUGINS_SHOWN]).to_api() for result in top],
            filtered=[FilteredCount(reason=reason[:1024], count=count) for reason, count in filtered],
            estimate=usage,
        )

    return LazyDecision(build, usage)
