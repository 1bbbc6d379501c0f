"""Scoring nodes from a snapshot: a pure lookup, run for every node for every pod.

Per node and plugin: the sample's precomputed score, or, when there is no fresh sample (none, or one
older than staleAfter), what onMissingMetrics says: Ignore leaves the plugin out of the node's total,
Neutral scores it `NEUTRAL_SCORE`, Requests scores it by the share of the node its pods request where the
caller gives one (cpu and memory: kube-scheduler's LeastAllocated, so an outage of Prometheus places as
kube-scheduler would) and `NEUTRAL_SCORE` otherwise, Unschedulable filters the node out. A sample past
the plugin's threshold filters the node out too; a requested share never does, as it is no reading. The
total is sum(weight x score) / sum(weight) over the plugins that count; a node with nothing that counts
gets `NEUTRAL_SCORE`.

`extra_load` adds percentage points to load-percent samples (the built-ins' values where they are a
percent), e.g. for pods placed too recently for the metrics to show them; the raw value reported
includes it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from promsched.api.policies import OnMissingMetrics
from promsched.api.statuses import NodeScore, PluginScore
from promsched.metrics.offloading import let_go, paced
from promsched.metrics.plugins import Plugin
from promsched.metrics.plugins.interface import clamp_percent
from promsched.metrics.snapshots import Snapshot

NEUTRAL_SCORE = 50.0


class FilterReason(NamedTuple):
    """Why a node is filtered out. `key` is the same for every node filtered for one cause (count by
    it, e.g. "cpu load above 85%"); `detail` names this node and its value."""

    key: str
    detail: str


class PluginResult(NamedTuple):
    name: str
    raw: float | None  # None: no fresh sample
    score: float | None  # None: the plugin does not count for this node


class NodeResult(NamedTuple):
    """One node's total and filter reasons. A tuple, not a frozen dataclass: it is built per node and
    snapshot, and per feasible node for each pod with preferences, and a tuple builds in a third of the
    time."""

    node: str
    total: float
    plugins: tuple[PluginResult, ...]
    reasons: tuple[FilterReason, ...]  # empty: the node fits

    @property
    def feasible(self) -> bool:
        return not self.reasons

    @property
    def lacks_samples(self) -> bool:
        """Some plugin had no fresh sample for the node."""
        return any(plugin.raw is None for plugin in self.plugins)

    def to_api(self) -> NodeScore:
        """The status form (Decision.topNodes); build it only for the few nodes that are shown."""
        plugins = [PluginScore(name=p.name, raw=p.raw, score=p.score) for p in self.plugins]
        return NodeScore(node=self.node, total=self.total, plugins=plugins)


# The extra load and the requested shares one node was scored with, each by plugin name.
_Adjustment = tuple[Mapping[str, float] | None, Mapping[str, float] | None]


@dataclass(slots=True)
class _Scored:
    """Nodes scored without extra load, valid while no sample changes freshness: from `since` until
    the first fresh sample turns stale."""

    since: float
    until: float
    results: dict[str, NodeResult] = field(default_factory=dict)
    # node -> the extra load and requested shares it was last scored with, and the result: they change
    # only when a pod is placed on (or leaves) the node, so most nodes with some are looked up too.
    adjusted: dict[str, tuple[_Adjustment, NodeResult]] = field(default_factory=dict)


@dataclass(slots=True)
class ScoreMemo:
    """The scores worked out from one snapshot, so that each node is scored once per snapshot rather
    than once per pod. Its owner keeps one per snapshot in use; given another snapshot it starts over."""

    snapshot: Snapshot | None = None
    scored: _Scored | None = None

    def at(self, snapshot: Snapshot, moment: float) -> _Scored:
        memo = self.scored
        if self.snapshot is not snapshot or memo is None or not memo.since <= moment <= memo.until:
            stale_after = snapshot.plan.stale_after_seconds
            fresh_since = moment - stale_after
            expiries = [
                sample.sample_time + stale_after
                for plugin_snapshot in snapshot.plugins.values()
                for sample in plugin_snapshot.samples.values()
                if sample.sample_time >= fresh_since
            ]
            memo = self.scored = _Scored(moment, min(expiries, default=math.inf))
            self.snapshot = snapshot
        return memo

    def let_go(self) -> None:
        """Free the scores on the metrics worker (`offloading.let_go`), once no decision reads them: looked
        up after all, a node is scored anew."""
        scored, self.scored, self.snapshot = self.scored, None, None
        if scored is not None:
            let_go(emptied=(scored.results, scored.adjusted))


def score_nodes(
    snapshot: Snapshot,
    nodes: Iterable[str],
    *,
    now: float | None = None,
    extra_load: Mapping[str, Mapping[str, float]] | None = None,
    requested: Callable[[str], Mapping[str, float]] | None = None,
    memo: ScoreMemo | None = None,
) -> list[NodeResult]:
    """Each node's total and filter reasons under the snapshot's plan, in the order of `nodes`.

    `extra_load` is ``{node: {plugin: percentage points}}``; `requested(node)` is ``{plugin: percent}``,
    the share of the node its pods request, read where onMissingMetrics is Requests and a sample is
    missing; `now` defaults to the current time. This runs for every node for every pod: with a `memo`,
    each node is scored once per snapshot, extra load and requested shares, while its samples keep their
    freshness, and looked up afterwards.
    """
    moment = time.time() if now is None else now
    scored = (memo or ScoreMemo()).at(snapshot, moment)
    if snapshot.plan.on_missing is not OnMissingMetrics.REQUESTS:
        requested = None
    results = []
    for node in nodes:
        extra = extra_load.get(node) if extra_load else None
        shares = None
        if requested is not None and _plain(scored, snapshot, node, moment).lacks_samples:
            shares = requested(node)
        if not extra and not shares:
            results.append(_plain(scored, snapshot, node, moment))
            continue
        adjustment = (extra, shares)
        known = scored.adjusted.get(node)
        if known is None or not _same(known[0], adjustment):
            result = _score_node(snapshot, node, moment, extra, shares)
            known = scored.adjusted[node] = (adjustment, result)
        results.append(known[1])
    return results


def prescore(snapshot: Snapshot, nodes: Iterable[str]) -> ScoreMemo:
    """A memo with every node of `nodes` scored without extra load, as of now: pure work on the
    immutable snapshot, so it may run on another thread."""
    memo = ScoreMemo()
    score_nodes(snapshot, paced(nodes), memo=memo)
    return memo


def incoming_pod_reason(plugin: Plugin, node: str, value: float, percent: float) -> FilterReason | None:
    """Why the node is filtered when an incoming pod's `percent` of it would take `plugin`'s `value`
    past its threshold: the same key as the threshold's own reason, so the counts add up."""
    if not plugin.crosses_threshold(value, percent):
        return None
    with_pod = plugin.describe(value + percent)
    return FilterReason(plugin.threshold_reason, f"{node} {with_pod} with the pod's estimated {percent:.0f}%")


def _plain(scored: _Scored, snapshot: Snapshot, node: str, moment: float) -> NodeResult:
    """The node's result without extra load or requested shares, scored once per `scored`."""
    result = scored.results.get(node)
    if result is None:
        result = scored.results[node] = _score_node(snapshot, node, moment, None, None)
    return result


def _same(known: _Adjustment, adjustment: _Adjustment) -> bool:
    """Whether a node scored with `known` is scored with `adjustment` alike: the same mappings, or equal."""
    return all(old is new or old == new for old, new in zip(known, adjustment, strict=True))


def _score_node(
    snapshot: Snapshot,
    node: str,
    moment: float,
    extra: Mapping[str, float] | None,
    shares: Mapping[str, float] | None,
) -> NodeResult:
    plan = snapshot.plan
    fresh_since = moment - plan.stale_after_seconds
    on_missing = plan.on_missing
    scores_missing = on_missing is OnMissingMetrics.NEUTRAL or on_missing is OnMissingMetrics.REQUESTS
    missing_score = NEUTRAL_SCORE if scores_missing else None
    filter_missing = on_missing is OnMissingMetrics.UNSCHEDULABLE
    weighted = 0.0
    weights = 0
    scores: list[PluginResult] = []
    reasons: list[FilterReason] = []
    for plugin_snapshot in snapshot.plugins.values():
        plugin = plugin_snapshot.plugin
        name, weight = plugin.name, plugin.weight
        sample = plugin_snapshot.samples.get(node)
        if sample is None or sample.sample_time < fresh_since:
            share = shares.get(name) if shares else None
            score = missing_score if share is None else 100.0 - clamp_percent(share)
            scores.append(PluginResult(name, None, score))
            if score is not None:
                weighted += weight * score
                weights += weight
            elif filter_missing:
                state = "no sample" if sample is None else "a stale sample"
                reasons.append(FilterReason(f"{name} metrics missing", f"{node}: {state}"))
            continue
        if extra and (added := extra.get(name)):
            sample = plugin.with_extra_load(sample, added)
        score = sample.score
        scores.append(PluginResult(name, sample.value, score))
        weighted += weight * score
        weights += weight
        if sample.over_threshold:
            reasons.append(FilterReason(plugin.threshold_reason, f"{node} {plugin.describe(sample.value)}"))
    total = weighted / weights if weights else NEUTRAL_SCORE
    return NodeResult(node, total, tuple(scores), tuple(reasons))
