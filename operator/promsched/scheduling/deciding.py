"""One scheduling decision: filter every node, score the feasible ones from the snapshot, pick the best.

Pure and synchronous: it reads the cache and the snapshot and changes nothing, so it is tested without
a cluster and a cycle never waits on the network.

The cluster filters first prepare, once for the pod, what they need from the whole cluster (kube's
PreFilter); each may reject the pod outright. Every node then goes through the node filters and the
prepared checks. The feasible nodes are scored by load from the snapshot and, where the pod has
placement preferences that tell them apart, by those too, blended by the policy's preference weight.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from promsched.api.policies import DEFAULT_PREFERENCE_WEIGHT, BuiltinPlugin
from promsched.metrics.scoring import NodeResult, score_nodes
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.filters import (
    DEFAULT_CLUSTER_FILTERS,
    DEFAULT_FILTERS,
    ClusterFilter,
    Filter,
    run_checks,
    run_filters,
    summarize_failures,
    summarize_rejection,
)
from promsched.scheduling.filters.checks import NodeCheck, Rejection
from promsched.scheduling.pods import PodInfo
from promsched.scheduling.preempting import nodes_freed_by_preemption, preemption_note
from promsched.scheduling.scores import DEFAULT_SCORERS, Scorer, blend, score_preferences

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


# kube-scheduler's percentageOfNodesToScore default: every node in small clusters; in large ones, stop
# once this many feasible nodes are found (50% less 1% per 125 nodes, at least 5%, at least 100 nodes).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_PERCENT = 5
BASE_FEASIBLE_PERCENT = 50


def feasible_nodes_to_find(total_nodes: int) -> int:
    if total_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return total_nodes
    percent = max(MIN_FEASIBLE_PERCENT, BASE_FEASIBLE_PERCENT - total_nodes // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, total_nodes * percent // 100)


def herd_adjustments(
    cache: ClusterCache, snapshot: Snapshot, nodes: list[str]
) -> dict[str, dict[str, float]]:
    """Load (percent) to add per node and plugin for pods placed since the snapshot was taken, so a burst
    does not all land on the node that looked idlest when the metrics were read."""
    if not any(name in snapshot.plugins for name in (BuiltinPlugin.CPU, BuiltinPlugin.MEMORY)):
        return {}
    adjustments = {}
    candidates = set(nodes)
    # Only nodes with a placement since the snapshot can need an adjustment: few, even in a burst.
    for node in cache.nodes_placed_since(snapshot.taken_at):
        if node not in candidates:
            continue
        cpu, memory = cache.recent_load_percent(node, snapshot.taken_at)
        if cpu or memory:
            adjustments[node] = {BuiltinPlugin.CPU.value: cpu, BuiltinPlugin.MEMORY.value: memory}
    return adjustments


def prepare_checks(
    pod: PodInfo, cache: ClusterCache, cluster_filters: tuple[ClusterFilter, ...]
) -> list[NodeCheck] | Rejection:
    """Each cluster filter's per-node check for this pod, in order, or the first rejection."""
    checks = []
    for cluster_filter in cluster_filters:
        prepared = cluster_filter.prepare(pod, cache)
        if isinstance(prepared, Rejection):
            return prepared
        if prepared is not None:
            checks.append(prepared)
    return checks


def with_preferences(
    pod: PodInfo, cache: ClusterCache, ranked: list[NodeResult], scorers: tuple[Scorer, ...], weight: int
) -> list[NodeResult]:
    """`ranked` with each total blended with the pod's preference score, and the preference plugins'
    parts listed after the metric plugins; unchanged when no preference tells the nodes apart."""
    if not weight or not scorers:
        return ranked
    preferences = score_preferences(pod, cache, [cache.nodes[result.node] for result in ranked], scorers)
    if preferences is None:
        return ranked
    return [
        NodeResult(
            result.node,
            blend(result.total, total, weight),
            result.plugins + parts,
            result.reasons,
        )
        for result, total, parts in zip(ranked, preferences.totals, preferences.parts, strict=True)
    ]


def decide(
    pod: PodInfo,
    cache: ClusterCache,
    snapshot: Snapshot,
    *,
    filters: tuple[Filter, ...] = DEFAULT_FILTERS,
    rng: random.Random | None = None,
    cluster_filters: tuple[ClusterFilter, ...] = DEFAULT_CLUSTER_FILTERS,
    scorers: tuple[Scorer, ...] = DEFAULT_SCORERS,
    preference_weight: int = DEFAULT_PREFERENCE_WEIGHT,
) -> Outcome:
    total_nodes = len(cache.nodes)
    checks = prepare_checks(pod, cache, cluster_filters)
    if isinstance(checks, Rejection):
        everywhere = {checks.message: total_nodes} if total_nodes else {}
        return Outcome(None, (), everywhere, total_nodes, summarize_rejection(total_nodes, checks))
    filtered: Counter[str] = Counter()
    failed: list[tuple[str, str]] = []
    ranked: list[NodeResult] = []
    names = list(cache.nodes)
    wanted = feasible_nodes_to_find(total_nodes)
    # Start where the previous pod's search stopped, so every node gets its turn (as kube does).
    start = cache.next_start % total_nodes if total_nodes else 0
    order = names[start:] + names[:start]
    position = 0
    while position < total_nodes and len(ranked) < wanted:
        feasible: list[str] = []
        while position < total_nodes and len(feasible) < wanted - len(ranked):
            name = order[position]
            position += 1
            node = cache.nodes[name]
            reason = run_filters(pod, node, cache.usage_of(name), filters)
            if reason is None and checks:
                reason = run_checks(node, checks)
            if reason is None:
                feasible.append(name)
            else:
                filtered[reason] += 1
                failed.append((name, reason))
        # Metric thresholds filter too: a chunk may leave fewer feasible nodes than wanted.
        for result in score_nodes(snapshot, feasible, extra_load=herd_adjustments(cache, snapshot, feasible)):
            if result.feasible:
                ranked.append(result)
            else:
                filtered[result.reasons[0].key] += 1
    cache.next_start = (start + position) % total_nodes if total_nodes else 0
    if not ranked:
        message = summarize_failures(total_nodes, filtered)
        freed = nodes_freed_by_preemption(pod, cache, snapshot, failed, filters, checks)
        if freed:
            message += preemption_note(freed)
        return Outcome(None, (), dict(filtered), total_nodes, message)
    ranked = with_preferences(pod, cache, ranked, scorers, preference_weight)
    ranked.sort(key=lambda r: r.total, reverse=True)
    best = ranked[0].total
    ties = [r for r in ranked if best - r.total <= TIE_EPSILON]
    chosen = (rng or random).choice(ties)
    return Outcome(chosen.node, tuple(ranked), dict(filtered), total_nodes)
