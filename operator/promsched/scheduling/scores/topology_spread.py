"""ScheduleAnyway topology spread constraints, as kube-scheduler's PodTopologySpread score.

Each constraint counts the matching pods of the pod's namespace in a node's domain (on the node itself
for the hostname key), as the filter counts them; the count is weighted by log(number of domains + 2)
so that small topologies are not drowned by big ones, plus maxSkew - 1 to soften small differences.
The node with fewest scores 100 (all fewest: all 100); nodes lacking a constraint's key score 0.
System default spreading (constraints kube derives from Services and ReplicaSets) is not applied.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from promsched.scheduling.filters.topology_spread import matching_pods_per_node
from promsched.scheduling.framework import MAX_SCORE, NodeScores
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache

HOSTNAME: Final = "kubernetes.io/hostname"


class PodTopologySpreadScore:
    name = "PodTopologySpread"
    weight = 2

    def skips(self, pod: PodInfo, cache: ClusterCache) -> bool:
        return all(constraint.hard for constraint in pod.spread_constraints)

    def score(self, pod: PodInfo, cache: ClusterCache, nodes: Sequence[NodeInfo]) -> NodeScores | None:
        constraints = tuple(constraint for constraint in pod.spread_constraints if not constraint.hard)
        if not constraints:
            return None
        # The nodes carrying every key, as of the cache the layout follows (and `nodes` come from).
        layout = cache.indexes.spread_layouts.of(pod, constraints, cache)
        carrying = layout.carrying
        scored = [node for node in nodes if node.name in carrying]
        per_node = [matching_pods_per_node(pod, constraint, cache) for constraint in constraints]
        counts = layout.domain_counts(per_node)
        labels = cache.indexes.node_labels.following(cache)
        domain_weights = [
            math.log(
                (
                    len(scored)
                    if c.topology_key == HOSTNAME
                    else _domains_among(scored, c.topology_key, len(labels.by_label.get(c.topology_key, ())))
                )
                + 2
            )
            for c in constraints
        ]
        # Each constraint's part of a node's raw score: count x domain weight + maxSkew - 1, by node for
        # the hostname key (a node is its own domain), else by the node's domain (worked out per domain).
        parts: list[tuple[str | None, dict[str, float], float]] = []  # (key or None: by node, part, absent)
        for index, constraint in enumerate(constraints):
            weight, softening = domain_weights[index], constraint.max_skew - 1
            by_node = constraint.topology_key == HOSTNAME
            counted = per_node[index] if by_node else counts[index]
            part = {where: count * weight + softening for where, count in counted.items()}
            parts.append((None if by_node else constraint.topology_key, part, float(softening)))
        raw: list[int | None] = []  # None: the node lacks a key and is not scored
        for node in nodes:
            name = node.name
            if name not in carrying:
                raw.append(None)
                continue
            total = 0.0
            for key, part, absent in parts:
                total += part.get(name if key is None else node.labels[key], absent)
            raw.append(math.floor(total + 0.5))  # Go's math.Round, for these non-negative sums
        present = [value for value in raw if value is not None]
        lowest, highest = min(present, default=0), max(present, default=0)
        scores = [
            0.0
            if value is None
            else float(MAX_SCORE if highest == 0 else MAX_SCORE * (highest + lowest - value) // highest)
            for value in raw
        ]
        return NodeScores([None if value is None else float(value) for value in raw], scores)


def _domains_among(nodes: Sequence[NodeInfo], key: str, most: int) -> int:
    """How many domains of `key` `nodes` are in: `most` (the cluster's) once all are seen, which a few
    hundred nodes over a few zones reach within the first few."""
    seen: set[str] = set()
    for node in nodes:
        seen.add(node.labels[key])
        if len(seen) >= most:
            break
    return len(seen)
