"""Required inter-pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity filter.

Per cycle, as kube's PreFilter, three counts of pods per topology domain (topology key, value):
- the pods matching all of the incoming pod's affinity terms, in the domains of each term's key;
- the pods matching each of its anti-affinity terms, in the domains of that term's key;
- the existing pods whose own required anti-affinity terms match the incoming pod, in their domains.
A node then passes if each affinity term's domain holds a match (or nothing in the cluster matches and
the pod matches its own terms: the first of a group that attracts itself), no anti-affinity term's
domain holds a match, and the node is in no domain an existing pod keeps the incoming pod out of.

The counts of the pod's own terms are kept across pods (`cluster.affinity_matches`), and the nodes
rejected are found through the domains counted (`rejections`), so a pod's cost follows the domains and
the nodes whose pods changed, not the nodes and pods of the whole cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from promsched.scheduling.filters.queueing_hints import (
    affinity_finds_placed_pod,
    has_interpod_rules,
    hints_of,
)
from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.affinity_terms import AffinityTerm
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache
    from promsched.scheduling.cluster.node_labels import NodeLabelIndex

AFFINITY: Final = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"

Domain = tuple[str, str]  # (topology key, the node's value of it)

_EVENTS: Final = ClusterEvent.ASSIGNED_POD | ClusterEvent.NODE | ClusterEvent.NAMESPACE_UPDATED
_AFFINITY: Final = Status(AFFINITY, Code.UNRESOLVABLE, _EVENTS)
_ANTI_AFFINITY: Final = Status(ANTI_AFFINITY, Code.UNSCHEDULABLE, _EVENTS)
_EXISTING_ANTI_AFFINITY: Final = Status(EXISTING_ANTI_AFFINITY, Code.UNSCHEDULABLE, _EVENTS)


def _bump(counts: dict[Domain, int], domain: Domain, delta: int) -> None:
    """Add `delta`, dropping domains that reach zero so that an empty map means no match anywhere."""
    count = counts.get(domain, 0) + delta
    if count:
        counts[domain] = count
    else:
        counts.pop(domain, None)


class InterPodAffinityCheck:
    def __init__(self, pod: PodInfo, cache: ClusterCache) -> None:
        self.pod = pod
        self.cache = cache
        self.own_namespace_labels = cache.labels_of_namespace(pod.namespace)
        self.affinity_terms = pod.pod_affinity.required
        self.anti_terms = pod.pod_affinity.required_anti
        self.affinity_counts: dict[Domain, int] = {}
        self.anti_counts: dict[Domain, int] = {}
        self.existing_anti_counts: dict[Domain, int] = {}
        # The first pod of a group with affinity to itself has nothing to join yet.
        self.attracts_itself = bool(self.affinity_terms) and all(
            term.matches(pod.namespace, pod.labels, self.own_namespace_labels) for term in self.affinity_terms
        )

    def count_existing_anti_affinity(self, other: PodInfo, node: NodeInfo, delta: int) -> None:
        for term in other.pod_affinity.required_anti:
            if term.matches(self.pod.namespace, self.pod.labels, self.own_namespace_labels):
                self._count(self.existing_anti_counts, term, node, delta)

    def count_affinity(self, other: PodInfo, node: NodeInfo, delta: int) -> None:
        """`other` counts for the affinity terms only when it matches all of them, as in kube."""
        labels = self.cache.labels_of_namespace(other.namespace)
        if all(term.matches(other.namespace, other.labels, labels) for term in self.affinity_terms):
            for term in self.affinity_terms:
                self._count(self.affinity_counts, term, node, delta)

    def count_anti_affinity(self, term: AffinityTerm, other: PodInfo, node: NodeInfo, delta: int) -> None:
        if term.matches(other.namespace, other.labels, self.cache.labels_of_namespace(other.namespace)):
            self._count(self.anti_counts, term, node, delta)

    @staticmethod
    def _count(counts: dict[Domain, int], term: AffinityTerm, node: NodeInfo, delta: int) -> None:
        value = node.labels.get(term.topology_key)
        if value is not None:
            _bump(counts, (term.topology_key, value), delta)

    def _update(self, other: PodInfo, node: NodeInfo, delta: int) -> None:
        self.count_existing_anti_affinity(other, node, delta)
        if self.affinity_terms:
            self.count_affinity(other, node, delta)
        for term in self.anti_terms:
            self.count_anti_affinity(term, other, node, delta)

    def remove_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        self._update(pod, node, -1)

    def add_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        self._update(pod, node, 1)

    def check(self, node: NodeInfo) -> Status | None:
        labels = node.labels
        if self.affinity_terms and not self._satisfies_affinity(labels):
            return _AFFINITY
        for term in self.anti_terms:
            value = labels.get(term.topology_key)
            if value is not None and (term.topology_key, value) in self.anti_counts:
                return _ANTI_AFFINITY
        if self.existing_anti_counts:
            for domain in labels.items():
                if domain in self.existing_anti_counts:
                    return _EXISTING_ANTI_AFFINITY
        return None

    def rejections(self, cache: ClusterCache) -> dict[str, Status]:
        """The nodes outside the domains the affinity terms admit, found through those domains, then of
        the others those of the domains holding an anti-affinity match, checked: as kube's PreFilter
        makes the node loop a lookup, this makes the pod's cost the domains', not a visit to each node."""
        labels = cache.indexes.node_labels.following(cache)
        rejected = (
            dict.fromkeys(self._outside_affinity(labels, cache), _AFFINITY) if self.affinity_terms else {}
        )
        candidates: set[str] = set()
        for key, value in (*self.anti_counts, *self.existing_anti_counts):
            candidates.update(labels.named(key, value))
        nodes = cache.nodes
        for name in candidates.difference(rejected):
            if (status := self.check(nodes[name])) is not None:
                rejected[name] = status
        return rejected

    def _outside_affinity(self, labels: NodeLabelIndex, cache: ClusterCache) -> Iterable[str]:
        """The nodes `_satisfies_affinity` refuses."""
        keys = {term.topology_key for term in self.affinity_terms}
        if not self.affinity_counts:
            # Nothing matches anywhere: the first of a group that attracts itself may go to any node
            # carrying every key; any other pod fits nowhere.
            if not self.attracts_itself:
                return cache.nodes
            return set().union(*(labels.lacking(key, cache) for key in keys))
        # Else a node must be, for each key, in a domain holding a match.
        admitted: set[str] | None = None
        for key in keys:
            held = set().union(
                *(labels.named(*domain) for domain in self.affinity_counts if domain[0] == key)
            )
            admitted = held if admitted is None else admitted & held
        return cache.nodes.keys() - (admitted or set())

    def _satisfies_affinity(self, labels: Mapping[str, str]) -> bool:
        matched_everywhere = True
        for term in self.affinity_terms:
            value = labels.get(term.topology_key)
            if value is None:
                return False  # the node must carry every term's topology key
            if (term.topology_key, value) not in self.affinity_counts:
                matched_everywhere = False
        return matched_everywhere or (not self.affinity_counts and self.attracts_itself)


class InterPodAffinity:
    name = "InterPodAffinity"
    events = _EVENTS
    hints = hints_of(
        (ClusterEvent.ASSIGNED_POD_ADDED, affinity_finds_placed_pod),
        (ClusterEvent.ASSIGNED_POD_UPDATED, has_interpod_rules),
        (ClusterEvent.NAMESPACE_UPDATED, has_interpod_rules),
    )

    def prepare(self, pod: PodInfo, cache: ClusterCache) -> InterPodAffinityCheck | None:
        nodes = cache.nodes
        state = InterPodAffinityCheck(pod, cache)
        for uid in cache.pods_that_may_repel(pod.labels):
            node_name, other = cache.counted[uid]
            node = nodes.get(node_name)
            if node is not None:
                state.count_existing_anti_affinity(other, node, 1)
        if not (state.affinity_terms or state.anti_terms or state.existing_anti_counts):
            return None
        if state.affinity_terms:
            kept = cache.indexes.affinity_matches.domains(state.affinity_terms, cache)
            if kept is not None:
                state.affinity_counts = dict(kept)  # a copy: preemption's assessment changes it
            else:  # terms that select namespaces by their labels, counted here
                # A pod that counts matches every term, so the first term's selector finds all candidates.
                for node_name, other in cache.pods_selected_by(state.affinity_terms[0].selector):
                    node = nodes.get(node_name)
                    if node is not None:
                        state.count_affinity(other, node, 1)
        for term in state.anti_terms:
            kept = cache.indexes.affinity_matches.domains((term,), cache)
            if kept is None:  # a term that selects namespaces by their labels, counted here
                for node_name, other in cache.pods_selected_by(term.selector):
                    node = nodes.get(node_name)
                    if node is not None:
                        state.count_anti_affinity(term, other, node, 1)
            elif not state.anti_counts:
                state.anti_counts = dict(kept)  # a copy: preemption's assessment changes it
            else:
                for domain, count in kept.items():
                    _bump(state.anti_counts, domain, count)
        return state
