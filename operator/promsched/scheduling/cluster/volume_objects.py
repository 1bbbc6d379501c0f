"""The objects the volume filters read, as the cache holds them: claims, volumes and storage classes,
CSI drivers and their storage capacities, CSINodes and VolumeAttachments, and the claims and volumes
assumed while a pod's volumes are bound."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from promsched.scheduling.objects.csi_nodes import CSINodeInfo, VolumeAttachmentInfo
from promsched.scheduling.objects.storage_capacities import CSIDriverInfo, StorageCapacityInfo
from promsched.scheduling.objects.volumes import ClaimInfo, StorageClassInfo, VolumeInfo


@dataclass
class VolumeObjects:
    csi_nodes: dict[str, CSINodeInfo] = field(default_factory=dict)
    # VolumeAttachments by name, and by node: the volumes attached to each node.
    attachments: dict[str, VolumeAttachmentInfo] = field(default_factory=dict)
    node_attachments: dict[str, dict[str, VolumeAttachmentInfo]] = field(default_factory=dict)
    claims: dict[tuple[str, str], ClaimInfo] = field(default_factory=dict)
    volumes: dict[str, VolumeInfo] = field(default_factory=dict)
    storage_classes: dict[str, StorageClassInfo] = field(default_factory=dict)
    csi_drivers: dict[str, CSIDriverInfo] = field(default_factory=dict)
    storage_capacities: dict[tuple[str, str], StorageCapacityInfo] = field(default_factory=dict)
    # Claims and volumes as the scheduler assumes them while it binds a pod's volumes (kube's assume
    # cache): a claim given a selected node, a volume given a claimRef. Each holds until the watch
    # shows a newer state of the object, or the binding is reverted.
    assumed_claims: dict[tuple[str, str], ClaimInfo] = field(default_factory=dict)
    assumed_volumes: dict[str, VolumeInfo] = field(default_factory=dict)

    def upsert_claim(self, claim: ClaimInfo) -> bool:
        """Store a claim; True when it is new or changed (more than its resourceVersion)."""
        key = (claim.namespace, claim.name)
        previous = self.claims.get(key)
        self.claims[key] = claim
        assumed = self.assumed_claims.get(key)
        if assumed is not None and claim.resource_version > assumed.resource_version:
            del self.assumed_claims[key]
        return previous is None or replace(previous, resource_version=claim.resource_version) != claim

    def remove_claim(self, namespace: str, name: str) -> None:
        self.claims.pop((namespace, name), None)
        self.assumed_claims.pop((namespace, name), None)

    def claim(self, namespace: str, name: str) -> ClaimInfo | None:
        """The claim as assumed, else as the watch shows it."""
        key = (namespace, name)
        return self.assumed_claims.get(key) or self.claims.get(key)

    def upsert_volume(self, volume: VolumeInfo) -> bool:
        """Store a volume; True when it is new or changed (more than its resourceVersion)."""
        previous = self.volumes.get(volume.name)
        self.volumes[volume.name] = volume
        assumed = self.assumed_volumes.get(volume.name)
        if assumed is not None and volume.resource_version > assumed.resource_version:
            del self.assumed_volumes[volume.name]
        return previous is None or replace(previous, resource_version=volume.resource_version) != volume

    def remove_volume(self, name: str) -> None:
        self.volumes.pop(name, None)
        self.assumed_volumes.pop(name, None)

    def volume(self, name: str) -> VolumeInfo | None:
        """The volume as assumed, else as the watch shows it."""
        return self.assumed_volumes.get(name) or self.volumes.get(name)

    def upsert_csi_driver(self, driver: CSIDriverInfo) -> bool:
        """Store a CSIDriver; True when it is new or changed."""
        previous = self.csi_drivers.get(driver.name)
        self.csi_drivers[driver.name] = driver
        return previous != driver

    def remove_csi_driver(self, name: str) -> None:
        self.csi_drivers.pop(name, None)

    def upsert_storage_capacity(self, capacity: StorageCapacityInfo) -> bool:
        """Store a CSIStorageCapacity; True when it is new or changed."""
        previous = self.storage_capacities.get(capacity.key)
        self.storage_capacities[capacity.key] = capacity
        return previous != capacity

    def remove_storage_capacity(self, namespace: str, name: str) -> None:
        self.storage_capacities.pop((namespace, name), None)

    def upsert_storage_class(self, storage_class: StorageClassInfo) -> bool:
        """Store a storage class; True when it is new or changed."""
        previous = self.storage_classes.get(storage_class.name)
        self.storage_classes[storage_class.name] = storage_class
        return previous != storage_class

    def remove_storage_class(self, name: str) -> None:
        self.storage_classes.pop(name, None)

    def upsert_csi_node(self, csi_node: CSINodeInfo) -> bool:
        """Store a CSINode; True when it is new or one of its drivers may attach more volumes than before."""
        previous = self.csi_nodes.get(csi_node.name)
        self.csi_nodes[csi_node.name] = csi_node
        return previous is None or csi_node.limit_increased_since(previous)

    def remove_csi_node(self, name: str) -> None:
        self.csi_nodes.pop(name, None)

    def upsert_attachment(self, attachment: VolumeAttachmentInfo) -> None:
        self.remove_attachment(attachment.name)
        self.attachments[attachment.name] = attachment
        self.node_attachments.setdefault(attachment.node, {})[attachment.name] = attachment

    def remove_attachment(self, name: str) -> bool:
        """Forget a VolumeAttachment; True when it was held."""
        attachment = self.attachments.pop(name, None)
        if attachment is None:
            return False
        on_node = self.node_attachments[attachment.node]
        del on_node[name]
        if not on_node:
            del self.node_attachments[attachment.node]
        return True
