"""Which waiting pods a cluster change may help, as kube's QueueingHints judge it; each filter names
the hints of its events beside them (`hints`), and the queue asks them before it wakes a pod."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from promsched.scheduling.framework import ClusterChange, ClusterEvent, QueueingHint
from promsched.scheduling.objects.pods import PodInfo

NO_HINTS: Final[MappingProxyType[ClusterEvent, QueueingHint]] = MappingProxyType({})


def affinity_finds_placed_pod(waiting: PodInfo, change: ClusterChange) -> bool:
    """The pod placed is what one of the waiting pod's required affinity terms looks for."""
    placed = change.pod
    return placed is not None and any(
        term.matches(placed.namespace, placed.labels, change.namespace_labels)
        for term in waiting.pod_affinity.required
    )


def spreading_counts_placed_pod(waiting: PodInfo, change: ClusterChange) -> bool:
    """The pod placed is one the waiting pod's spreading counts."""
    placed = change.pod
    return (
        placed is not None
        and placed.namespace == waiting.namespace
        and any(constraint.selector.matches(placed.labels) for constraint in waiting.spread_constraints)
    )


def has_interpod_rules(waiting: PodInfo, change: ClusterChange) -> bool:
    """Relabelled pods and namespaces concern pods with affinity terms or spread constraints."""
    return bool(waiting.pod_affinity or waiting.spread_constraints)


def uses_claims(waiting: PodInfo, change: ClusterChange) -> bool:
    return bool(waiting.claims)


def uses_changed_claim(waiting: PodInfo, change: ClusterChange) -> bool:
    if change.claim is None:
        return False
    namespace, name = change.claim
    return waiting.namespace == namespace and any(claim.name == name for claim in waiting.claims)


def hints_of(*pairs: tuple[ClusterEvent, QueueingHint]) -> MappingProxyType[ClusterEvent, QueueingHint]:
    return MappingProxyType(dict(pairs))
