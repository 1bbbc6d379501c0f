"""CSIDrivers and CSIStorageCapacities, as kube-scheduler's VolumeBinding reads them to provision.

A driver that declares `storageCapacity: true` publishes, per storage class and topology segment, how
large a volume it can still create there; a claim to provision on a node then needs such an object
whose segment includes the node and whose limit holds the claim's request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promsched.scheduling.objects.fields import FieldError, object_field
from promsched.scheduling.objects.resources import parse_quantity
from promsched.scheduling.objects.selectors import NOTHING, LabelSelector, parse_label_selector


@dataclass(frozen=True, slots=True)
class CSIDriverInfo:
    name: str
    storage_capacity: bool = False  # spec.storageCapacity: its capacity objects limit provisioning
    # spec.preventPodSchedulingIfMissing: pods with its volumes go only where it is installed.
    prevent_pod_scheduling_if_missing: bool = False

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> CSIDriverInfo:
        metadata = object_field(obj.get("metadata"), "metadata")
        spec = object_field(obj.get("spec"), "spec")
        return cls(
            name=metadata.get("name") or "",
            storage_capacity=spec.get("storageCapacity") is True,
            prevent_pod_scheduling_if_missing=spec.get("preventPodSchedulingIfMissing") is True,
        )


@dataclass(frozen=True, slots=True)
class StorageCapacityInfo:
    namespace: str
    name: str
    storage_class: str
    node_topology: LabelSelector  # nodes the segment includes; absent: none
    capacity: int | None = None
    maximum_volume_size: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def limit(self) -> int | None:
        """The largest volume it admits: maximumVolumeSize, the more precise, else capacity (kube's
        volumeLimit); None: unknown, which admits none."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity

    def holds(self, storage_class: str, size: int, labels: Mapping[str, str]) -> bool:
        """Whether a volume of `size` bytes of `storage_class` fits here for a node with `labels`."""
        limit = self.limit
        return (
            self.storage_class == storage_class
            and limit is not None
            and limit >= size
            and self.node_topology.matches(labels)
        )

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> StorageCapacityInfo:
        metadata = object_field(obj.get("metadata"), "metadata")
        try:
            topology = parse_label_selector(obj.get("nodeTopology"), "nodeTopology")
        except FieldError:
            topology = NOTHING  # kube cannot convert it, and counts the segment unavailable
        return cls(
            namespace=metadata.get("namespace") or "",
            name=metadata.get("name") or "",
            storage_class=obj.get("storageClassName") or "",
            node_topology=topology,
            capacity=_quantity(obj.get("capacity"), "capacity"),
            maximum_volume_size=_quantity(obj.get("maximumVolumeSize"), "maximumVolumeSize"),
        )


def _quantity(value: object, path: str) -> int | None:
    if value is None:
        return None
    try:
        return parse_quantity(value, path)
    except FieldError:
        return None
