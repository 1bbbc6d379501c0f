"""One scheduling decision: filter every node, score the feasible ones from the snapshot, pick the best.

Pure and synchronous: it reads the cache and the snapshot and changes nothing, so it is tested without
a cluster and a cycle never waits on the network.

The cluster filters first prepare, once for the pod, what they need from the whole cluster (kube's
PreFilter); each may reject the pod outright. Every node then goes through the node filters and the
prepared checks. The feasible nodes are scored by load from the snapshot and, where the pod has
placement preferences that tell them apart, by those too, blended by the policy's preference weight.
"""

from __future__ import annotations

import itertools
import operator
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from promsched.api.policies import DEFAULT_PREFERENCE_WEIGHT
from promsched.metrics.scoring import NodeResult
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.boards import Search
from promsched.scheduling.cycle.memos import DecisionMemo
from promsched.scheduling.cycle.nominations import filter_node, nominated_before
from promsched.scheduling.cycle.preempting import Preemption, nominated_node, preempt
from promsched.scheduling.cycle.preemption_candidates import Evictable
from promsched.scheduling.cycle.rankings import Ranking
from promsched.scheduling.cycle.thresholding import IncomingLoad
from promsched.scheduling.filters import (
    DEFAULT_CLUSTER_FILTERS,
    DEFAULT_FILTERS,
    known_rejections,
    run_checks,
    run_filters,
    summarize_failures,
    summarize_rejection,
)
from promsched.scheduling.filters.node_verdicts import (
    node_only_prefix,
    pod_key,
    usage_key,
    usage_only,
    usage_totals_only,
)
from promsched.scheduling.framework import (
    ClusterEvent,
    ClusterFilter,
    Code,
    Filter,
    NodeCheck,
    Rejection,
    Scorer,
    Status,
)
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.scores import DEFAULT_SCORERS, blend, score_preferences

_total = operator.attrgetter("total")  # ranking's sort key: cheaper than a lambda over hundreds of nodes

# Scores closer than this are equal: the best among them is chosen at random, as kube-scheduler does.
TIE_EPSILON = 1e-6


@dataclass(frozen=True)
class Outcome:
    """`node` is where the pod goes, or None with `message` saying why it fits nowhere."""

    node: str | None
    ranked: Sequence[NodeResult]  # feasible nodes, best first
    filtered: dict[str, int]  # reason -> node count
    total_nodes: int
    message: str = ""
    next_start: int = 0  # where the next pod's search over the nodes starts
    # The cluster events that may make the pod fit, when it fits nowhere: the rejecting filters' own.
    lifted_by: ClusterEvent = ClusterEvent.NONE
    # When it fits nowhere: the node and victims to preempt, or whether its nomination is to be cleared.
    preemption: Preemption = field(default_factory=Preemption)


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
    pod: PodInfo,
    cache: ClusterCache,
    ranked: list[NodeResult],
    scorers: tuple[Scorer, ...],
    weight: int,
    nodes: list[NodeInfo] | None = None,
) -> Sequence[NodeResult]:
    """`ranked` best first, each total blended with the pod's preference score and the preference
    plugins' parts listed after the metric plugins'; by load alone when no preference tells the nodes
    apart. `nodes`: the ranked nodes' objects, when the caller has them."""
    preferences = None
    scoring = [scorer for scorer in scorers if not scorer.skips(pod, cache)] if weight else []
    if scoring:
        if nodes is None:
            nodes = [cache.nodes[result.node] for result in ranked]
        preferences = score_preferences(pod, cache, nodes, scoring)
    if preferences is None:
        ranked.sort(key=_total, reverse=True)
        return ranked
    totals = [
        blend(result.total, total, weight) for result, total in zip(ranked, preferences.totals, strict=True)
    ]
    return Ranking(ranked, totals, preferences)


def _nominated_node_fit(
    pod: PodInfo,
    cache: ClusterCache,
    memo: DecisionMemo,
    filters: tuple[Filter, ...],
    checks: list[NodeCheck],
) -> NodeResult | None:
    """The pod's nominated node, scored, when the pod fits there: kube tries it before all others
    (evaluateNominatedNode), so a preemptor lands where its victims made room."""
    name = nominated_node(pod, cache)
    node = cache.nodes.get(name) if name else None
    if node is None:
        return None
    nominated = nominated_before(pod, cache, name)
    if filter_node(pod, node, cache.usage_of(name), filters, checks, nominated) is not None:
        return None
    [result] = memo.judge_load(cache, [name], memo.incoming_load(pod, cache))
    return result if result.feasible else None


def decide(
    pod: PodInfo,
    cache: ClusterCache,
    snapshot: Snapshot,
    *,
    memo: DecisionMemo | None = None,
    start: int = 0,
    filters: tuple[Filter, ...] = DEFAULT_FILTERS,
    rng: random.Random | None = None,
    cluster_filters: tuple[ClusterFilter, ...] = DEFAULT_CLUSTER_FILTERS,
    scorers: tuple[Scorer, ...] = DEFAULT_SCORERS,
    preference_weight: int = DEFAULT_PREFERENCE_WEIGHT,
    evictable: Evictable | None = None,
) -> Outcome:
    """Where `pod` goes. The search over nodes begins at `start`; the outcome says where the next
    pod's begins. `memo` (for `snapshot`) keeps what this decision works out for the next ones.
    `evictable` limits which lower-priority pods preemption may evict (None: any)."""
    if memo is None:
        memo = DecisionMemo(snapshot)
    elif memo.snapshot is not snapshot:
        raise ValueError("the decision memo belongs to another snapshot")
    total_nodes = len(cache.nodes)
    checks = prepare_checks(pod, cache, cluster_filters)
    if isinstance(checks, Rejection):
        everywhere = {checks.message: total_nodes} if total_nodes else {}
        message = summarize_rejection(total_nodes, checks)
        lifted_by = checks.lifted_by | ClusterEvent.NODE_ADDED
        # A PreFilter's rejection holds on every node, and no eviction lifts it.
        rejected = [(name, Status(checks.message, Code.UNRESOLVABLE, lifted_by)) for name in cache.nodes]
        preemption = Preemption()
        if total_nodes:
            preemption = preempt(pod, cache, memo, rejected, (), (), rng=rng, evictable=evictable)
        message += preemption.note()
        return Outcome(None, (), everywhere, total_nodes, message, start, lifted_by, preemption)
    filters = tuple(node_filter for node_filter in filters if node_filter.concerns(pod))
    chosen_before = _nominated_node_fit(pod, cache, memo, filters, checks)
    if chosen_before is not None:
        return Outcome(chosen_before.node, (chosen_before,), {}, total_nodes, next_start=start)
    # The pod's own estimated load counts against the cpu and memory thresholds.
    incoming = memo.incoming_load(pod, cache)
    wanted = feasible_nodes_to_find(total_nodes)
    # Start where the previous pod's search stopped, so every node gets its turn (as kube does).
    start = start % total_nodes if total_nodes else 0
    split = node_only_prefix(filters)
    boarded = not cache.nominated and usage_only(filters[split:])
    whole = boarded and usage_totals_only(filters[split:])
    search = None
    # Nothing but the node and its usage decides the filters: the memo's board has every node's outcome,
    # which the checks overrule on the nodes they reject, when they can tell which.
    checked_out = known_rejections(checks, cache) if boarded and total_nodes else None
    if checked_out is not None:
        key = (filters, pod_key(pod), usage_key(pod), incoming.amounts if incoming is not None else None)
        herd = memo.herd_loads(cache)
        board = memo.boards.board(key, pod, cache, snapshot, memo.scores, herd, filters, incoming)
        search = board.search(start, wanted, checked_out)
    failed: list[tuple[str, Status]] = []
    if search is None or not search.ranked:  # preemption, when nothing fits, reads each node's status
        search, failed = _walk(pod, cache, memo, filters, checks, incoming, start, wanted, whole)
    ranked, filtered = search.ranked, search.filtered
    # A node added to the cluster may fit any pod: kube's plugins all register NodeAdd.
    lifted_by = search.lifted_by | ClusterEvent.NODE_ADDED
    next_start = (start + search.searched) % total_nodes if total_nodes else 0
    if not ranked:
        message = summarize_failures(total_nodes, filtered)
        preemption = Preemption()
        if total_nodes:
            preemption = preempt(pod, cache, memo, failed, filters, checks, rng=rng, evictable=evictable)
        message += preemption.note()
        return Outcome(None, (), dict(filtered), total_nodes, message, next_start, lifted_by, preemption)
    best_first = with_preferences(pod, cache, ranked, scorers, preference_weight, search.nodes)
    best = best_first[0].total
    ties = list(itertools.takewhile(lambda r: best - r.total <= TIE_EPSILON, best_first))
    chosen = (rng or random).choice(ties)
    return Outcome(chosen.node, best_first, dict(filtered), total_nodes, next_start=next_start)


def _walk(
    pod: PodInfo,
    cache: ClusterCache,
    memo: DecisionMemo,
    filters: tuple[Filter, ...],
    checks: list[NodeCheck],
    incoming: IncomingLoad | None,
    start: int,
    wanted: int,
    whole: bool,
) -> tuple[Search, list[tuple[str, Status]]]:
    """The nodes from `start` through filters and scores, node by node (with each rejected node's
    status), until `wanted` feasible ones are found, or all. `whole`: every filter reads the nodes'
    usage totals alone and no pod is nominated."""
    filtered: Counter[str] = Counter()
    failed: list[tuple[str, Status]] = []
    lifted_by = ClusterEvent.NONE
    ranked: list[NodeResult] = []
    names = list(cache.nodes)
    total_nodes = len(names)
    order = names[start:] + names[:start]
    position = 0
    # Looked up once: the loop below runs for hundreds of nodes per pod, and nominations are rare.
    nodes, usages, usage_of, any_nominated = cache.nodes, cache.usage, cache.usage_of, bool(cache.nominated)
    # The node-only filters come first: their verdicts are looked up, and the rest run where they pass.
    # When the rest read only the nodes' usage totals, every filter's verdict is looked up (not beside
    # nominated pods, which kube adds to a node's usage for the filters).
    split = node_only_prefix(filters)
    node_only, rest = filters[:split], filters[split:]
    verdicts = memo.verdicts.of(filters if whole else node_only, pod, with_usage=whole)
    while position < total_nodes and len(ranked) < wanted:
        feasible: list[str] = []
        room = wanted - len(ranked)
        while position < total_nodes and len(feasible) < room:
            name = order[position]
            position += 1
            node = nodes[name]
            known = verdicts.get(name)
            if whole:
                usage = usages.get(name) or usage_of(name)
                if (
                    known is None
                    or known[0] is not node
                    or known[1] is not usage.requested
                    or known[2] != usage.pods
                ):
                    status = run_filters(pod, node, usage, filters)
                    known = verdicts[name] = (node, usage.requested, usage.pods, status)
                status = known[3]
                if status is None and checks:
                    status = run_checks(node, checks)
            else:
                if known is None or known[0] is not node:
                    status = run_filters(pod, node, usage_of(name), node_only)
                    known = verdicts[name] = (node, None, 0, status)
                status = known[3]
                if status is None:
                    usage = usages.get(name) or usage_of(name)
                    if any_nominated and (nominated := nominated_before(pod, cache, name)):
                        status = filter_node(pod, node, usage, rest, checks, nominated)
                    else:
                        # `filter_node` with nothing nominated, inlined: this runs for hundreds of nodes.
                        status = run_filters(pod, node, usage, rest)
                        if status is None and checks:
                            status = run_checks(node, checks)
            if status is None:
                feasible.append(name)
            else:
                filtered[status.reason] += 1
                failed.append((name, status))
                lifted_by |= status.lifted_by
        # Metric thresholds filter too: a chunk may leave fewer feasible nodes than wanted.
        for result in memo.judge_load(cache, feasible, incoming):
            if not result.reasons:  # feasible (the property, inlined: once per node)
                ranked.append(result)
            else:
                filtered[result.reasons[0].key] += 1
                lifted_by |= ClusterEvent.METRICS_REFRESHED
    return Search(ranked, None, filtered, lifted_by, position), failed
