"""CSINodes (the CSI drivers on a node, how many volumes each can attach), VolumeAttachments (the
volumes attached to a node) and the CSI volumes that count against the limits, as kube-scheduler's
NodeVolumeLimits plugin reads them.

A PersistentVolume of a CSI driver is identified by ``(driver, volumeHandle)``. A volume of an in-tree
plugin that kube 1.37 has migrated to CSI (EBS, GCE PD, Azure Disk, Cinder, Portworx) counts against
its CSI driver, with the handle csi-translation-lib gives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from promsched.scheduling.objects.fields import FieldError, integer_field, list_field, object_field

# In-tree plugins whose volumes count against a CSI driver (kube's isCSIMigrationOn): plugin -> driver.
MIGRATED_PLUGINS: Final = MappingProxyType(
    {
        "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
        "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
        "kubernetes.io/azure-disk": "disk.csi.azure.com",
        "kubernetes.io/cinder": "cinder.csi.openstack.org",
        "kubernetes.io/portworx-volume": "pxd.portworx.com",
    }
)
_EBS: Final = "kubernetes.io/aws-ebs"
_GCE_PD: Final = "kubernetes.io/gce-pd"
# In-tree PersistentVolume sources of migrated plugins: (source field, plugin, the field naming the disk).
_IN_TREE_SOURCES: Final = (
    ("awsElasticBlockStore", _EBS, "volumeID"),
    ("gcePersistentDisk", _GCE_PD, "pdName"),
    ("azureDisk", "kubernetes.io/azure-disk", "diskURI"),
    ("cinder", "kubernetes.io/cinder", "volumeID"),
    ("portworxVolume", "kubernetes.io/portworx-volume", "volumeID"),
)
_UNSPECIFIED: Final = "UNSPECIFIED"  # csi-translation-lib's stand-in for a GCE project or zone
_BETA_ZONE: Final = "failure-domain.beta.kubernetes.io/zone"
_ZONE: Final = "topology.kubernetes.io/zone"


def _empty_limits() -> Mapping[str, int]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CSINodeInfo:
    """One node's CSINode: the `drivers` installed on it, and `limits` mapping a driver to its
    spec.drivers[].allocatable.count; a driver without a count (or not listed) has no limit."""

    name: str
    limits: Mapping[str, int] = field(default_factory=_empty_limits)
    drivers: frozenset[str] = frozenset()

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> CSINodeInfo:
        """Parse a CSINode as the API returns it; raises `FieldError` naming a malformed field."""
        metadata = object_field(obj.get("metadata"), "metadata")
        spec = object_field(obj.get("spec"), "spec")
        limits = {}
        drivers = list_field(spec.get("drivers"), "spec.drivers")
        for index, driver in enumerate(drivers):
            path = f"spec.drivers[{index}]"
            allocatable = object_field(driver.get("allocatable"), f"{path}.allocatable")
            if allocatable.get("count") is not None:
                limits[str(driver.get("name") or "")] = integer_field(
                    allocatable["count"], f"{path}.allocatable.count"
                )
        return cls(
            name=metadata.get("name") or "",
            limits=MappingProxyType(limits),
            drivers=frozenset(str(driver.get("name") or "") for driver in drivers),
        )

    def limit_increased_since(self, previous: CSINodeInfo) -> bool:
        """Whether some driver may attach more volumes than before (kube's queueing hint for a CSINode
        update: an absent count reads as 0)."""
        return any(count > previous.limits.get(driver, 0) for driver, count in self.limits.items())


@dataclass(frozen=True, slots=True)
class VolumeAttachmentInfo:
    """A VolumeAttachment: the PersistentVolume `volume` that driver `attacher` attaches to `node`."""

    name: str
    node: str = ""
    attacher: str = ""
    volume: str = ""  # spec.source.persistentVolumeName; empty for an inline volume's attachment

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> VolumeAttachmentInfo:
        metadata = object_field(obj.get("metadata"), "metadata")
        spec = object_field(obj.get("spec"), "spec")
        source = object_field(spec.get("source"), "spec.source")
        return cls(
            name=metadata.get("name") or "",
            node=spec.get("nodeName") or "",
            attacher=spec.get("attacher") or "",
            volume=source.get("persistentVolumeName") or "",
        )


@dataclass(frozen=True, slots=True)
class CSIVolume:
    """A volume as the attach limits count it: its CSI driver and the handle that identifies it;
    `translated` for an in-tree volume counted as its CSI driver's."""

    driver: str
    handle: str
    translated: bool = False


def csi_volume(spec: Mapping[str, Any], labels: Mapping[str, Any]) -> CSIVolume | None:
    """The CSI volume of a PersistentVolume's spec, translated from a migrated in-tree source as
    csi-translation-lib does; None for other volumes (local, NFS, ...) or an unreadable source."""
    try:
        return _csi_volume(spec, labels)
    except FieldError:
        return None


def _csi_volume(spec: Mapping[str, Any], labels: Mapping[str, Any]) -> CSIVolume | None:
    if spec.get("csi") is not None:
        source = object_field(spec["csi"], "spec.csi")
        return CSIVolume(str(source.get("driver") or ""), str(source.get("volumeHandle") or ""))
    for source_field, plugin, disk_field in _IN_TREE_SOURCES:
        if spec.get(source_field) is not None:
            disk = str(object_field(spec[source_field], f"spec.{source_field}").get(disk_field) or "")
            return CSIVolume(
                MIGRATED_PLUGINS[plugin], _translated_handle(plugin, disk, labels), translated=True
            )
    return None


def _translated_handle(plugin: str, disk: str, labels: Mapping[str, Any]) -> str:
    """The volume handle csi-translation-lib gives an in-tree disk."""
    if plugin == _EBS and disk.startswith("aws://"):
        return disk.rsplit("/", 1)[-1]  # aws://<zone>/<vol-id> is the same volume as its bare id
    if plugin == _GCE_PD:
        zones = str(labels.get(_BETA_ZONE) or labels.get(_ZONE) or _UNSPECIFIED)
        where = f"regions/{zones}" if "__" in zones else f"zones/{zones}"
        return f"projects/{_UNSPECIFIED}/{where}/disks/{disk}"
    return disk
