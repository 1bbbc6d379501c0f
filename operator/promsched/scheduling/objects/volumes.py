"""PersistentVolumeClaims, PersistentVolumes and StorageClasses as the volume filters need them.

Parsed once per object. A claim bound to a volume ties the pod to the nodes the volume's node affinity
and zone labels allow; a claim whose class waits for its first consumer is bound by the scheduler to an
available volume, or provisioned on the node it chooses (see `volume_binding_plans`), so each keeps
what kube-scheduler's VolumeBinding matches them by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from promsched.scheduling.objects.csi_nodes import CSIVolume, csi_volume
from promsched.scheduling.objects.fields import FieldError, list_field, object_field, version_of
from promsched.scheduling.objects.node_selectors import (
    NodeSelector,
    NodeSelectorTerm,
    parse_node_selector_term,
)
from promsched.scheduling.objects.resources import parse_quantity
from promsched.scheduling.objects.selectors import NOTHING, LabelSelector, parse_label_selector

# Set by the PersistentVolume controller once it has bound claim and volume both ways; until then a
# claim naming a volume is only pre-bound, and kube-scheduler treats it as unbound.
BIND_COMPLETED_ANNOTATION: Final = "pv.kubernetes.io/bind-completed"
# The pre-GA way to name a claim's class; it wins over spec.storageClassName when present.
BETA_STORAGE_CLASS_ANNOTATION: Final = "volume.beta.kubernetes.io/storage-class"
# Set by the scheduler on a claim to provision: the node the provisioner creates the volume for.
SELECTED_NODE_ANNOTATION: Final = "volume.kubernetes.io/selected-node"
# Set on a volume whose claimRef the scheduler or the PersistentVolume controller wrote (not a user).
BOUND_BY_CONTROLLER_ANNOTATION: Final = "pv.kubernetes.io/bound-by-controller"
# The pre-GA way to name a volume's class, as for claims.
BETA_VOLUME_CLASS_ANNOTATION: Final = BETA_STORAGE_CLASS_ANNOTATION
WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"
# A class whose volumes are created by hand (local volumes): kube never provisions for it.
NO_PROVISIONER: Final = "kubernetes.io/no-provisioner"
FILESYSTEM: Final = "Filesystem"  # the volumeMode of claims and volumes that do not name one
VOLUME_AVAILABLE: Final = "Available"
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
    uid: str = ""
    resource_version: int = 0
    requested_storage: int | None = None  # bytes of spec.resources.requests.storage; None: no request
    selector: LabelSelector | None = None  # spec.selector; None: any volume
    volume_mode: str = FILESYSTEM
    attributes_class: str = ""  # spec.volumeAttributesClassName
    selected_node: str | None = None  # the selected-node annotation

    @property
    def bound(self) -> bool:
        return bool(self.volume_name) and self.bind_completed

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

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
            uid=metadata.get("uid") or "",
            resource_version=version_of(metadata) or 0,
            requested_storage=_requested_storage(spec),
            selector=_claim_selector(spec),
            volume_mode=spec.get("volumeMode") or FILESYSTEM,
            attributes_class=spec.get("volumeAttributesClassName") or "",
            selected_node=annotations.get(SELECTED_NODE_ANNOTATION),
        )


def _requested_storage(spec: Mapping[str, Any]) -> int | None:
    resources = object_field(spec.get("resources"), "spec.resources")
    requests = object_field(resources.get("requests"), "spec.resources.requests")
    if "storage" not in requests:
        return None
    try:
        return parse_quantity(requests["storage"], "spec.resources.requests.storage")
    except FieldError:
        return None  # the API server validates it; were it unreadable, no size to compare


def _claim_selector(spec: Mapping[str, Any]) -> LabelSelector | None:
    if spec.get("selector") is None:
        return None
    try:
        return parse_label_selector(spec["selector"], "spec.selector")
    except FieldError:
        return NOTHING  # kube cannot match a selector it cannot read to any volume


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A volume's spec.claimRef: the claim it is bound (or pre-bound) to; `uid` empty: any claim of
    that name."""

    namespace: str
    name: str
    uid: str = ""

    def names(self, claim: ClaimInfo) -> bool:
        """Whether it refers to `claim` (kube's IsVolumeBoundToClaim)."""
        return (
            self.name == claim.name
            and self.namespace == claim.namespace
            and (not self.uid or self.uid == claim.uid)
        )


@dataclass(frozen=True, slots=True)
class VolumeInfo:
    """A PersistentVolume: the nodes it is reachable from. `node_affinity` None: every node;
    `zones` are (label, allowed values) pairs from its zone and region labels."""

    name: str
    node_affinity: NodeSelector | None = None
    zones: tuple[tuple[str, frozenset[str]], ...] = ()
    csi: CSIVolume | None = None  # the CSI volume it is, for attach limits; None: not a CSI volume
    resource_version: int = 0
    storage_class: str = ""
    capacity: int = 0  # bytes of spec.capacity.storage
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = FILESYSTEM
    attributes_class: str = ""
    available: bool = False  # status.phase Available
    claim_ref: ClaimRef | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False
    bound_by_controller: bool = False

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
        annotations = object_field(metadata.get("annotations"), "metadata.annotations")
        status = object_field(obj.get("status"), "status")
        storage_class = annotations.get(BETA_VOLUME_CLASS_ANNOTATION)
        if storage_class is None:
            storage_class = spec.get("storageClassName") or ""
        capacity = object_field(spec.get("capacity"), "spec.capacity")
        modes = spec.get("accessModes") or []
        return cls(
            name=metadata.get("name") or "",
            node_affinity=_volume_node_affinity(spec),
            zones=tuple(
                (label, zones) for label in ZONE_LABELS if (zones := _zone_set(labels.get(label))) is not None
            ),
            csi=csi_volume(spec, labels),
            resource_version=version_of(metadata) or 0,
            storage_class=str(storage_class),
            capacity=_capacity(capacity.get("storage", 0)),
            access_modes=frozenset(mode for mode in modes if isinstance(mode, str)),
            volume_mode=spec.get("volumeMode") or FILESYSTEM,
            attributes_class=spec.get("volumeAttributesClassName") or "",
            available=status.get("phase") == VOLUME_AVAILABLE,
            claim_ref=_claim_ref(spec),
            labels=dict(labels),
            deleting=metadata.get("deletionTimestamp") is not None,
            bound_by_controller=BOUND_BY_CONTROLLER_ANNOTATION in annotations,
        )


def _capacity(value: object) -> int:
    try:
        return parse_quantity(value, "spec.capacity.storage")
    except FieldError:
        return 0  # validated by the API server; unreadable, it fits no claim


def _claim_ref(spec: Mapping[str, Any]) -> ClaimRef | None:
    if spec.get("claimRef") is None:
        return None
    ref = object_field(spec["claimRef"], "spec.claimRef")
    return ClaimRef(ref.get("namespace") or "", ref.get("name") or "", ref.get("uid") or "")


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


# A class's allowedTopologies term: (label, values) pairs a node's labels must all match.
TopologyTerm = tuple[tuple[str, frozenset[str]], ...]


@dataclass(frozen=True, slots=True)
class StorageClassInfo:
    name: str
    wait_for_first_consumer: bool = False
    provisioner: str = ""
    allowed_topologies: tuple[TopologyTerm, ...] = ()

    @property
    def provisions(self) -> bool:
        return bool(self.provisioner) and self.provisioner != NO_PROVISIONER

    def allows(self, labels: Mapping[str, str]) -> bool:
        """Whether volumes it provisions may be reachable from a node with `labels` (kube's
        MatchTopologySelectorTerms): no terms allow every node; an empty term allows none."""
        if not self.allowed_topologies:
            return True
        return any(
            term and all(labels.get(key) in values for key, values in term)
            for term in self.allowed_topologies
        )

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> StorageClassInfo:
        metadata = object_field(obj.get("metadata"), "metadata")
        return cls(
            name=metadata.get("name") or "",
            wait_for_first_consumer=obj.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER,
            provisioner=obj.get("provisioner") or "",
            allowed_topologies=tuple(
                _topology_term(term, f"allowedTopologies[{index}]")
                for index, term in enumerate(list_field(obj.get("allowedTopologies"), "allowedTopologies"))
            ),
        )


def _topology_term(term: Mapping[str, Any], path: str) -> TopologyTerm:
    """A term as pairs; a requirement without values selects nothing, and so does its whole term."""
    pairs = []
    for expression in list_field(term.get("matchLabelExpressions"), f"{path}.matchLabelExpressions"):
        values = expression.get("values") or []
        if not values:
            return ()
        pairs.append((str(expression.get("key") or ""), frozenset(str(value) for value in values)))
    return tuple(pairs)
