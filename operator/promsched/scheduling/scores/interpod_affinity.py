"""Preferred inter-pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity score.

Each topology domain (key, value) collects weights from the existing pods in it:
- +weight of each of the pod's preferred affinity terms a pod there matches, -weight for anti-affinity;
- +1 (kube's hardPodAffinityWeight) for each required affinity term of a pod there that the incoming
  pod matches, and +weight/-weight for its preferred affinity/anti-affinity terms the pod matches.
A node's raw score sums the domains it is in; scores are scaled from the lowest (0) to the highest (100).
Nothing to score (no such terms, or none matching) leaves the plugin out, as kube's PreScore Skip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from promsched.scheduling.framework import MAX_SCORE, NodeScores
from promsched.scheduling.objects.affinity_terms import AffinityTerm
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache

# kube-scheduler's default InterPodAffinityArgs.hardPodAffinityWeight.
HARD_POD_AFFINITY_WEIGHT: Final = 1
# What a node without a topology key is looked up by: no label value holds a NUL.
_NO_DOMAIN: Final = "\x00"


class _DomainWeights:
    def __init__(self) -> None:
        self.by_key: dict[str, dict[str, int]] = {}

    def add(self, term: AffinityTerm, node: NodeInfo, weight: int) -> None:
        value = node.labels.get(term.topology_key)
        if value is not None:
            by_value = self.by_key.setdefault(term.topology_key, {})
            by_value[value] = by_value.get(value, 0) + weight

    def of(self, nodes: Sequence[NodeInfo]) -> list[int]:
        """Each node's sum over the domains it is in (a node without a key is in none of its domains)."""
        if len(self.by_key) == 1:  # most pods' terms share one topology key: one lookup per node
            [(key, by_value)] = self.by_key.items()
            return [by_value.get(node.labels.get(key, _NO_DOMAIN), 0) for node in nodes]
        keyed = list(self.by_key.items())
        return [
            sum(by_value.get(node.labels.get(key, _NO_DOMAIN), 0) for key, by_value in keyed)
            for node in nodes
        ]


class InterPodAffinityScore:
    name = "InterPodAffinity"
    weight = 2

    def skips(self, pod: PodInfo, cache: ClusterCache) -> bool:
        # Neither the pod's preferred terms nor any counted pod's terms to weigh (kube skips so too).
        terms = pod.pod_affinity
        return not (terms.preferred or terms.preferred_anti or cache.with_scored_terms)

    def score(self, pod: PodInfo, cache: ClusterCache, nodes: Sequence[NodeInfo]) -> NodeScores | None:
        weights = _DomainWeights()
        known = cache.nodes
        for weighted, sign in (
            *((term, 1) for term in pod.pod_affinity.preferred),
            *((term, -1) for term in pod.pod_affinity.preferred_anti),
        ):
            term = weighted.term
            for node_name, other in cache.pods_selected_by(term.selector):  # its labels match
                node = known.get(node_name)
                if node is not None and term.covers(
                    other.namespace, cache.labels_of_namespace(other.namespace)
                ):
                    weights.add(term, node, sign * weighted.weight)
        own_namespace = cache.labels_of_namespace(pod.namespace)
        for uid, node_name in cache.with_scored_terms.items():
            node = known.get(node_name)
            if node is None:
                continue
            terms = cache.counted[uid][1].pod_affinity
            for term in terms.required:
                if term.matches(pod.namespace, pod.labels, own_namespace):
                    weights.add(term, node, HARD_POD_AFFINITY_WEIGHT)
            for weighted in terms.preferred:
                if weighted.term.matches(pod.namespace, pod.labels, own_namespace):
                    weights.add(weighted.term, node, weighted.weight)
            for weighted in terms.preferred_anti:
                if weighted.term.matches(pod.namespace, pod.labels, own_namespace):
                    weights.add(weighted.term, node, -weighted.weight)
        if not weights.by_key:
            return None
        raw = weights.of(nodes)
        lowest, highest = min(raw, default=0), max(raw, default=0)
        spread = highest - lowest
        scores = [float(int(MAX_SCORE * ((value - lowest) / spread))) if spread > 0 else 0.0 for value in raw]
        return NodeScores([float(value) for value in raw], scores)
