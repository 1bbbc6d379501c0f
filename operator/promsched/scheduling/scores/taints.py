"""PreferNoSchedule taints, as kube-scheduler's TaintToleration score: a node counts the
PreferNoSchedule taints the pod does not tolerate (by its tolerations for that effect or for any), and
the node with most scores 0, one with none 100."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING

from promsched.scheduling.framework import NodeScores
from promsched.scheduling.objects.nodes import PREFER_NO_SCHEDULE, NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.scores.normalizing import scaled_to_best

_TAINTS = attrgetter("taints")

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache


class TaintTolerationScore:
    name = "TaintToleration"
    weight = 3

    def skips(self, pod: PodInfo, cache: ClusterCache) -> bool:
        return not cache.indexes.prefer_no_schedule.following(cache)  # most clusters: no node is so

    def score(self, pod: PodInfo, cache: ClusterCache, nodes: Sequence[NodeInfo]) -> NodeScores | None:
        taints = list(map(_TAINTS, nodes))  # in C: this runs for hundreds of nodes per pod
        if not any(taints):
            return None  # most clusters: no node has a taint at all
        tolerations = [t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
        raw = [
            sum(
                1
                for taint in held
                if taint.effect == PREFER_NO_SCHEDULE and not any(t.tolerates(taint) for t in tolerations)
            )
            if held
            else 0  # most nodes have none: no generator per node and pod
            for held in taints
        ]
        if not any(raw):
            return None  # no node has a PreferNoSchedule taint the pod does not tolerate
        return scaled_to_best(raw, fewer_is_better=True)
