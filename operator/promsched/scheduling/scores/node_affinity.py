"""Preferred node affinity, as kube-scheduler's NodeAffinity score: the sum of the weights of the
preferred terms a node matches, scaled so that the best node scores 100."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from promsched.scheduling.framework import NodeScores
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.scores.normalizing import scaled_to_best

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache


class NodeAffinityScore:
    name = "NodeAffinity"
    weight = 2

    def skips(self, pod: PodInfo, cache: ClusterCache) -> bool:
        return not pod.preferred_affinity

    def score(self, pod: PodInfo, cache: ClusterCache, nodes: Sequence[NodeInfo]) -> NodeScores | None:
        if not pod.preferred_affinity:
            return None
        raw = [
            sum(
                preferred.weight
                for preferred in pod.preferred_affinity
                if preferred.term.matches(node.name, node.labels)
            )
            for node in nodes
        ]
        return scaled_to_best(raw)
