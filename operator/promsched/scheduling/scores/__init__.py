"""Placement preferences scored on the feasible nodes, as kube-scheduler's Score plugins do.

One scorer per module, each the counterpart of a kube-scheduler Score plugin with its normalisation:
preferred node affinity, PreferNoSchedule taints, ScheduleAnyway spread constraints and preferred
inter-pod (anti-)affinity. Each gives every feasible node 0..100, or nothing at all when the pod gives
it nothing to prefer. The scorers that tell nodes apart are averaged with kube's plugin weights into
one preference score per node, which `blend` weighs against the load total by the policy's
``placementPreferences.weight``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from promsched.metrics.scoring import PluginResult
from promsched.scheduling.framework import MAX_SCORE, NodeScores, Scorer
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.scores.interpod_affinity import InterPodAffinityScore
from promsched.scheduling.scores.node_affinity import NodeAffinityScore
from promsched.scheduling.scores.taints import TaintTolerationScore
from promsched.scheduling.scores.topology_spread import PodTopologySpreadScore

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache


DEFAULT_SCORERS: Final[tuple[Scorer, ...]] = (
    TaintTolerationScore(),
    NodeAffinityScore(),
    PodTopologySpreadScore(),
    InterPodAffinityScore(),
)


@dataclass(frozen=True, slots=True)
class Preferences:
    """The pod's preferences over the feasible nodes: `totals` 0..100 per node, and the results of the
    scorers that tell the nodes apart, by name."""

    totals: list[float]
    telling: list[tuple[str, NodeScores]]

    def parts(self, index: int) -> tuple[PluginResult, ...]:
        """The scorers' parts for the node at `index`, as plugin results (next to the metric plugins')."""
        return tuple(
            PluginResult(name, result.raw[index], result.scores[index]) for name, result in self.telling
        )


def score_preferences(
    pod: PodInfo, cache: ClusterCache, nodes: Sequence[NodeInfo], scorers: Sequence[Scorer] = DEFAULT_SCORERS
) -> Preferences | None:
    """The weighted average of the scorers that tell `nodes` apart; None when none does. A scorer giving
    every node the same score cannot prefer one, and leaving it out keeps the others' weight against
    load as the policy sets it."""
    telling: list[tuple[Scorer, NodeScores]] = []
    for scorer in scorers:
        result = scorer.score(pod, cache, nodes)
        if result is not None and len(set(result.scores)) > 1:
            telling.append((scorer, result))
    if not telling:
        return None
    weights = sum(scorer.weight for scorer, _ in telling)
    totals = [0.0] * len(nodes)
    for scorer, result in telling:
        share = scorer.weight / weights
        totals = [total + share * score for total, score in zip(totals, result.scores, strict=True)]
    return Preferences(totals, [(scorer.name, result) for scorer, result in telling])


def blend(load: float, preference: float, weight: int) -> float:
    """The node's total: its load score and its preference score, the preference counting `weight`
    percent."""
    return load + (preference - load) * weight / MAX_SCORE
