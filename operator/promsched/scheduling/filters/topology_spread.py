"""DoNotSchedule topology spread constraints, as kube-scheduler's PodTopologySpread filter.

Per cycle, as kube's PreFilter: for each constraint, the pods of the pod's namespace its selector
matches (terminating ones left out), counted per domain over the nodes that carry every constraint's
topology key and that the constraint's inclusion policies admit; and the smallest such count (the
global minimum, taken as 0 while there are fewer domains than minDomains). A node passes when, for
every constraint, its domain's count plus the pod itself (if the selector matches it) exceeds the
global minimum by at most maxSkew.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from promsched.scheduling.filters.queueing_hints import (
    has_interpod_rules,
    hints_of,
    spreading_counts_placed_pod,
)
from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.spread_constraints import SpreadConstraint

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache

SKEWED: Final = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL: Final = f"{SKEWED} (missing required label)"
_EVENTS: Final = ClusterEvent.ASSIGNED_POD | ClusterEvent.NODE | ClusterEvent.NODE_DELETED
_SKEWED: Final = Status(SKEWED, Code.UNSCHEDULABLE, _EVENTS)
_MISSING_LABEL: Final = Status(MISSING_LABEL, Code.UNRESOLVABLE, _EVENTS)


def matching_pods_per_node(
    pod: PodInfo, constraint: SpreadConstraint, cache: ClusterCache
) -> Mapping[str, int]:
    """Node -> how many of the pod's namespace's pods the constraint counts there (read-only). As kube,
    an empty selector counts nothing, and terminating pods do not count."""
    if constraint.selector.is_empty:
        return {}
    return cache.indexes.matching_pods.per_node(constraint.selector, pod.namespace, cache)


class TopologySpreadCheck:
    def __init__(self, pod: PodInfo, constraints: tuple[SpreadConstraint, ...], cache: ClusterCache) -> None:
        self.pod = pod
        self.constraints = constraints
        self.layout = cache.indexes.spread_layouts.of(pod, constraints, cache)
        per_node = [matching_pods_per_node(pod, constraint, cache) for constraint in constraints]
        self.counts = self.layout.domain_counts(per_node)
        self.minimums = [min(counts.values(), default=0) for counts in self.counts]
        self.self_matches = [int(c.selector.matches(pod.labels)) for c in constraints]

    def global_minimum(self, index: int) -> int:
        if len(self.counts[index]) < self.constraints[index].min_domains:
            return 0
        return self.minimums[index]

    def check(self, node: NodeInfo) -> Status | None:
        labels = node.labels
        for index, constraint in enumerate(self.constraints):
            value = labels.get(constraint.topology_key)
            if value is None:
                return _MISSING_LABEL
            matching = self.counts[index].get(value, 0) + self.self_matches[index]
            if matching - self.global_minimum(index) > constraint.max_skew:
                return _SKEWED
        return None

    def rejections(self, cache: ClusterCache) -> dict[str, Status]:
        """The nodes lacking a key, and those of the domains with more matching pods than a constraint's
        skew allows, checked."""
        labels = cache.indexes.node_labels.following(cache)
        candidates: set[str] = set()
        for index, constraint in enumerate(self.constraints):
            key = constraint.topology_key
            candidates.update(labels.lacking(key, cache))
            # `check` refuses a domain whose count exceeds this (a domain not counted has none).
            ceiling = constraint.max_skew + self.global_minimum(index) - self.self_matches[index]
            for value, count in self.counts[index].items():
                if count > ceiling:
                    candidates.update(labels.named(key, value))
        nodes = cache.nodes
        return {name: status for name in candidates if (status := self.check(nodes[name])) is not None}

    def _update(self, other: PodInfo, node: NodeInfo, delta: int) -> None:
        if other.namespace != self.pod.namespace:
            return
        for index, constraint in enumerate(self.constraints):
            value = self.layout.domains[index].get(node.name)  # None: the constraint counts no pod there
            if value is not None and constraint.selector.matches(other.labels):
                counts = self.counts[index]
                counts[value] = counts.get(value, 0) + delta
                self.minimums[index] = min(counts.values())

    def remove_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        self._update(pod, node, -1)

    def add_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        self._update(pod, node, 1)


class PodTopologySpread:
    name = "PodTopologySpread"
    events = _EVENTS
    hints = hints_of(
        (ClusterEvent.ASSIGNED_POD_ADDED, spreading_counts_placed_pod),
        (ClusterEvent.ASSIGNED_POD_UPDATED, has_interpod_rules),
    )

    def prepare(self, pod: PodInfo, cache: ClusterCache) -> TopologySpreadCheck | None:
        constraints = tuple(constraint for constraint in pod.spread_constraints if constraint.hard)
        return TopologySpreadCheck(pod, constraints, cache) if constraints else None
