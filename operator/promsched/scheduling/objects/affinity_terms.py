"""Inter-pod (anti-)affinity terms as kube-scheduler compiles them (framework.AffinityTerm).

A term selects the pods in its namespaces (``namespaces``, or those whose labels match
``namespaceSelector``; neither set means the owning pod's own namespace) whose labels match
``labelSelector``, and says where they are by ``topologyKey``. matchLabelKeys and mismatchLabelKeys need
no handling here: the API server merges them into ``labelSelector`` when the pod is created.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from promsched.scheduling.objects.fields import FieldError, list_field, object_field
from promsched.scheduling.objects.selectors import LabelSelector, parse_label_selector

POD_AFFINITY_PATH: Final = "spec.affinity.podAffinity"
POD_ANTI_AFFINITY_PATH: Final = "spec.affinity.podAntiAffinity"
_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]) -> bool:
        """Whether a pod in `namespace` (whose labels are `namespace_labels`) with `labels` is selected."""
        return self.covers(namespace, namespace_labels) and self.selector.matches(labels)

    def covers(self, namespace: str, namespace_labels: Mapping[str, str]) -> bool:
        """Whether the term selects pods in `namespace` (whose labels are `namespace_labels`), for pods its
        label selector is known to match."""
        return namespace in self.namespaces or self.namespace_selector.matches(namespace_labels)


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """spec.affinity.podAffinity and podAntiAffinity of one pod."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti: tuple[WeightedAffinityTerm, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.required or self.required_anti or self.preferred or self.preferred_anti)


NO_POD_AFFINITY: Final = PodAffinity()


def parse_pod_affinity(affinity: Mapping[str, Any], namespace: str) -> PodAffinity:
    """The inter-pod terms of ``spec.affinity`` for a pod in `namespace`."""
    attract = object_field(affinity.get("podAffinity"), POD_AFFINITY_PATH)
    repel = object_field(affinity.get("podAntiAffinity"), POD_ANTI_AFFINITY_PATH)
    parsed = PodAffinity(
        required=_required(attract, POD_AFFINITY_PATH, namespace),
        required_anti=_required(repel, POD_ANTI_AFFINITY_PATH, namespace),
        preferred=_preferred(attract, POD_AFFINITY_PATH, namespace),
        preferred_anti=_preferred(repel, POD_ANTI_AFFINITY_PATH, namespace),
    )
    return parsed if parsed else NO_POD_AFFINITY


def _required(kind: Mapping[str, Any], path: str, namespace: str) -> tuple[AffinityTerm, ...]:
    terms = list_field(kind.get(_REQUIRED), f"{path}.{_REQUIRED}")
    return tuple(_term(term, f"{path}.{_REQUIRED}[{index}]", namespace) for index, term in enumerate(terms))


def _preferred(kind: Mapping[str, Any], path: str, namespace: str) -> tuple[WeightedAffinityTerm, ...]:
    weighted = []
    for index, entry in enumerate(list_field(kind.get(_PREFERRED), f"{path}.{_PREFERRED}")):
        entry_path = f"{path}.{_PREFERRED}[{index}]"
        weight = entry.get("weight") or 0
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise FieldError(f"{entry_path}.weight: expected an integer, got {weight!r}")
        term = object_field(entry.get("podAffinityTerm"), f"{entry_path}.podAffinityTerm")
        # The API admits weights 1..100; a zero weight would add nothing to any node.
        if weight:
            weighted.append(
                WeightedAffinityTerm(_term(term, f"{entry_path}.podAffinityTerm", namespace), weight)
            )
    return tuple(weighted)


def _term(term: Mapping[str, Any], path: str, namespace: str) -> AffinityTerm:
    topology_key = term.get("topologyKey") or ""
    if not topology_key:
        raise FieldError(f"{path}.topologyKey: a topology key is required")
    namespaces = term.get("namespaces") or []
    if not isinstance(namespaces, list) or not all(isinstance(name, str) for name in namespaces):
        raise FieldError(f"{path}.namespaces: expected a list of strings, got {namespaces!r}")
    raw_namespace_selector = term.get("namespaceSelector")
    if not namespaces and raw_namespace_selector is None:
        namespaces = [namespace]
    return AffinityTerm(
        selector=parse_label_selector(term.get("labelSelector"), f"{path}.labelSelector"),
        namespaces=frozenset(namespaces),
        namespace_selector=parse_label_selector(raw_namespace_selector, f"{path}.namespaceSelector"),
        topology_key=topology_key,
    )
