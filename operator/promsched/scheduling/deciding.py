"""One scheduling decision: filter every node, score the feasible ones from the snapshot, pick the best.

Pure and synchronous: it reads the cache and the snapshot and changes nothing, so it is tested without
a cluster and a cycle never waits on the network.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from promsched.api.policies import BuiltinPlugin
from promsched.metrics.scoring import NodeResult, score_nodes
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.filters import DEFAULT_FILTERS, Filter, run_filters, summarize_failures
from promsched.scheduling.pods import PodInfo

# Scores closer than this are equal: the best among them is chosen at random, as kube-scheduler does.
TIE_EPSILON = 1e-6


@dataclass(frozen=True)
class Outcome:
    """`node` is where the pod goes, or None with `message` saying why it fits nowhere."""

    node: str | None
    ranked: tuple[NodeResult, ...]  # feasible nodes, best first
    filtered: dict[str, int]  # reason -> node count
    total_nodes: int
    message: str = ""


def herd_adjustments(
    cache: ClusterCache, snapshot: Snapshot, nodes: list[str]
) -> dict[str, dict[str, float]]:
    """Load (percent) to add per node and plugin for pods placed since the snapshot was taken, so a burst
    does not all land on the node that looked idlest when the metrics were read."""
    if not any(name in snapshot.plugins for name in (BuiltinPlugin.CPU, BuiltinPlugin.MEMORY)):
        return {}
    adjustments = {}
    for node in nodes:
        cpu, memory = cache.recent_load_percent(node, snapshot.taken_at)
        if cpu or memory:
            adjustments[node] = {BuiltinPlugin.CPU.value: cpu, BuiltinPlugin.MEMORY.value: memory}
    return adjustments


def decide(
    pod: PodInfo,
    cache: ClusterCache,
    snapshot: Snapshot,
    *,
    filters: tuple[Filter, ...] = DEFAULT_FILTERS,
    rng: random.Random | None = None,
) -> Outcome:
    filtered: Counter[str] = Counter()
    feasible: list[str] = []
    for name, node in cache.nodes.items():
        reason = run_filters(pod, node, cache.usage_of(name), filters)
        if reason is None:
            feasible.append(name)
        else:
            filtered[reason] += 1
    results = score_nodes(snapshot, feasible, extra_load=herd_adjustments(cache, snapshot, feasible))
    ranked = []
    for result in results:
        if result.feasible:
            ranked.append(result)
        else:
            filtered[result.reasons[0].key] += 1
    total_nodes = len(cache.nodes)
    if not ranked:
        message = (
            summarize_failures(total_nodes, filtered)
            if total_nodes
            else "no nodes available to schedule pods"
        )
        return Outcome(None, (), dict(filtered), total_nodes, message)
    ranked.sort(key=lambda r: r.total, reverse=True)
    best = ranked[0].total
    ties = [r for r in ranked if best - r.total <= TIE_EPSILON]
    chosen = (rng or random).choice(ties)
    return Outcome(chosen.node, tuple(ranked), dict(filtered), total_nodes)
