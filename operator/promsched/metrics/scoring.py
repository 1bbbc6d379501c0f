"""Scoring nodes from a snapshot: a pure lookup, run for every node for every pod.

Per node and plugin: the sample's precomputed score, or, when there is no fresh sample (none, or one
older than staleAfter), what onMissingMetrics says: Ignore leaves the plugin out of the node's total,
Neutral scores it `NEUTRAL_SCORE`, Unschedulable filters the node out. A sample past the plugin's
threshold filters the node out too. The total is sum(weight x score) / sum(weight) over the plugins that
count; a node with nothing that counts gets `NEUTRAL_SCORE`.

`extra_load` adds percentage points to load-percent samples (the built-ins' values where they are a
percent), e.g. for pods placed since the snapshot was taken; the raw value reported includes it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from promsched.api.policies import NodeScore, OnMissingMetrics, PluginScore
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


@dataclass(frozen=True, slots=True)
class NodeResult:
    node: str
    total: float
    plugins: tuple[PluginResult, ...]
    reasons: tuple[FilterReason, ...]  # empty: the node fits

    @property
    def feasible(self) -> bool:
        return not self.reasons

    def to_api(self) -> NodeScore:
        """The status form (Decision.topNodes); build it only for the few nodes that are shown."""
        plugins = [PluginScore(name=p.name, raw=p.raw, score=p.score) for p in self.plugins]
        return NodeScore(node=self.node, total=self.total, plugins=plugins)


def score_nodes(
    snapshot: Snapshot,
    nodes: Iterable[str],
    *,
    now: float | None = None,
    extra_load: Mapping[str, Mapping[str, float]] | None = None,
) -> list[NodeResult]:
    """Each node's total and filter reasons under the snapshot's plan, in the order of `nodes`.

    `extra_load` is ``{node: {plugin: percentage points}}``; `now` defaults to the current time.
    """
    plan = snapshot.plan
    fresh_since = (time.time() if now is None else now) - plan.stale_after_seconds
    on_missing = plan.on_missing
    missing_score = NEUTRAL_SCORE if on_missing is OnMissingMetrics.NEUTRAL else None
    filter_missing = on_missing is OnMissingMetrics.UNSCHEDULABLE
    plugins = [
        (plugin_snapshot.plugin, plugin_snapshot.samples) for plugin_snapshot in snapshot.plugins.values()
    ]
    no_extra: Mapping[str, float] = {}
    results = []
    for node in nodes:
        extra = extra_load.get(node, no_extra) if extra_load else no_extra
        weighted = 0.0
        weights = 0
        scores: list[PluginResult] = []
        reasons: list[FilterReason] = []
        for plugin, samples in plugins:
            sample = samples.get(node)
            if sample is None or sample.sample_time < fresh_since:
                scores.append(PluginResult(plugin.name, None, missing_score))
                if missing_score is not None:
                    weighted += plugin.weight * missing_score
                    weights += plugin.weight
                elif filter_missing:
                    state = "no sample" if sample is None else "a stale sample"
                    reasons.append(FilterReason(f"{plugin.name} metrics missing", f"{node}: {state}"))
                continue
            if added := extra.get(plugin.name):
                sample = plugin.with_extra_load(sample, added)
            scores.append(PluginResult(plugin.name, sample.value, sample.score))
            weighted += plugin.weight * sample.score
            weights += plugin.weight
            if sample.over_threshold:
                reasons.append(
                    FilterReason(plugin.threshold_reason, f"{node} {plugin.describe(sample.value)}")
                )
        total = weighted / weights if weights else NEUTRAL_SCORE
        results.append(NodeResult(node, total, tuple(scores), tuple(reasons)))
    return results
