"""PersistentVolumeClaims, PersistentVolumes and StorageClasses as the volume filters need them.

Parsed once per object. promsched places pods only on what is already bound: a claim bound to a volume
ties the pod to the nodes the volume's node affinity and zone labels allow. Binding or provisioning
volumes for a claim that waits for its first consumer is kube-scheduler's VolumeBinding work that
promsched does not do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from promsched.scheduling.node_selectors import NodeSelector, NodeSelectorTerm, parse_node_selector_term
from promsched.scheduling.resources import FieldError, list_field, object_field

# Set by the PersistentVolume controller once it has bound claim and volume both ways; until then a
# claim naming a volume is only pre-bound, and kube-scheduler treats it as unbound.
BIND_COMPLETED_ANNOTATION: Final = "pv.kubernetes.io/bind-completed"
# The pre-GA way to name a claim's class; it wins over spec.storageClassName when present.
BETA_STORAGE_CLASS_ANNOTATION: Final = "volume.beta.kubernetes.io/storage-class"
WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"
READ_WRITE_ONCE_POD: Final = "ReadWriteOncePod"
CLAIM_LOST: Final = "Lost"
# The labels kube-scheduler's VolumeZone plugin compares between a volume and a node, each with the GA
# label a node may carry instead (a volume's beta label also matches a node's GA label).
ZONE_LABELS: Final = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region": "topology.kubernetes.io/region",
}
# A volume in several zones lists them in one label value, separated so.
MULTI_ZONE_DELIMITER: Final = "__"
# A volume whose node affinity cannot be read matches no node, as kube-scheduler judges it.
NO_NODE: Final = NodeSelector(terms=())


@dataclass(frozen=True, slots=True)
class ClaimInfo:
    namespace: str
    name: str
    volume_name: str = ""
    bind_completed: bool = False
    storage_class: str = ""
    access_modes: frozenset[str] = frozenset()
    lost: bool = False  # status.phase Lost: its volume is gone
    deleting: bool = False
    controller_uid: str = ""  # the owner reference with controller: true (an ephemeral volume's pod)

    @property
    def bound(self) -> bool:
        return bool(self.volume_name) and self.bind_completed

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ClaimInfo:
        metadata = object_field(obj.get("metadata"), "metadata")
        spec = object_field(obj.get("spec"), "spec")
        status = object_field(obj.get("status"), "status")
        annotations = object_field(metadata.get("annotations"), "metadata.annotations")
        storage_class = annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
        if storage_class is None:
            storage_class = spec.get("storageClassName") or ""
        controller = next(
            (
                owner
                for owner in list_field(metadata.get("ownerReferences"), "metadata.ownerReferences")
                if owner.get("controller")
            ),
            {},
        )
        modes = spec.get("accessModes") or []
        return cls(
            namespace=metadata.get("namespace") or "default",
            name=metadata.get("name") or "",
            volume_name=spec.get("volumeName") or "",
            bind_completed=BIND_COMPLETED_ANNOTATION in annotations,
            storage_class=str(storage_class),
            access_modes=frozenset(mode for mode in modes if isinstance(mode, str)),
            lost=status.get("phase") == CLAIM_LOST,
            deleting=metadata.get("deletionTimestamp") is not None,
            controller_uid=controller.get("uid") or "",
        )


@dataclass(frozen=True, slots=True)
class VolumeInfo:
    """A PersistentVolume: the nodes it is reachable from. `node_affinity` None: every node;
    `zones` are (label, allowed values) pairs from its zone and region labels."""

    name: str
    node_affinity: NodeSelector | None = None
    zones: tuple[tuple[str, frozenset[str]], ...] = ()

    def reachable_from(self, labels: Mapping[str, str]) -> bool:
        # kube checks a volume's affinity against the node's labels alone (a node without a name), so
        # a matchFields term on metadata.name never matches.
        return self.node_affinity is None or self.node_affinity.matches("", labels)

    def in_zone_of(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with `labels` is in the volume's zones and regions. A node with no zone or
        region label at all is in every zone (a cluster without zones)."""
        if not any(label in labels for label in ZONE_LABELS):
            return True
        for label, zones in self.zones:
            value = labels.get(label)
            if value is None:
                value = labels.get(ZONE_LABELS[label])
            if value not in zones:
                return False
        return True

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> VolumeInfo:
        metadata = object_field(obj.get("metadata"), "metadata")
        spec = object_field(obj.get("spec"), "spec")
        labels = object_field(metadata.get("labels"), "metadata.labels")
        return cls(
            name=metadata.get("name") or "",
            node_affinity=_volume_node_affinity(spec),
            zones=tuple(
                (label, zones) for label in ZONE_LABELS if (zones := _zone_set(labels.get(label))) is not None
            ),
        )


def _volume_node_affinity(spec: Mapping[str, Any]) -> NodeSelector | None:
    try:
        affinity = object_field(spec.get("nodeAffinity"), "spec.nodeAffinity")
        required = affinity.get("required")
        if required is None:
            return None
        path = "spec.nodeAffinity.required.nodeSelectorTerms"
        raw_terms = list_field(
            object_field(required, "spec.nodeAffinity.required").get("nodeSelectorTerms"), path
        )
    except FieldError:
        return NO_NODE
    terms: list[NodeSelectorTerm] = []
    for index, raw in enumerate(raw_terms):
        # A term that does not parse matches no node; the others still may.
        try:
            term = parse_node_selector_term(raw, f"{path}[{index}]")
        except FieldError:
            continue
        if not term.is_empty:
            terms.append(term)
    return NodeSelector(terms=tuple(terms))


def _zone_set(value: object) -> frozenset[str] | None:
    """The zones of a volume's zone label; None for no label, or one kube ignores (an empty zone)."""
    if not isinstance(value, str):
        return None
    zones = [zone.strip() for zone in value.split(MULTI_ZONE_DELIMITER)]
    return None if not all(zones) else frozenset(zones)


@dataclass(frozen=True, slots=True)
class StorageClassInfo:
    name: str
    wait_for_first_consumer: bool = False

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> StorageClassInfo:
        metadata = object_field(obj.get("metadata"), "metadata")
        return cls(
            name=metadata.get("name") or "",
            wait_for_first_consumer=obj.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER,
        )
