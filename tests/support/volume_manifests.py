"""Volume manifests for the sandbox's tests (created through kubectl): PersistentVolumes, their claims and
classes that wait for the first consumer. Nothing a create refuses (resourceVersion, status) is set."""

from __future__ import annotations

from typing import Any, Final

from support.objects import HOSTNAME

NO_PROVISIONER: Final = "kubernetes.io/no-provisioner"


def volume_manifest(
    name: str,
    *,
    storage_class: str = "",
    on: str | None = None,
    local_path: str | None = None,
    csi_driver: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A 1Gi ReadWriteOnce PersistentVolume of `storage_class`: pinned to node `on` by hostname, local at
    `local_path`, or a volume of `csi_driver` (its handle is its name)."""
    body: dict[str, Any] = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": storage_class,
        "persistentVolumeReclaimPolicy": "Retain",
        **spec,
    }
    if local_path is not None:
        body["local"] = {"path": local_path}
    if csi_driver is not None:
        body["csi"] = {"driver": csi_driver, "volumeHandle": name}
    if on is not None:
        term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [on]}]}
        body["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": body}


def claim_manifest(
    namespace: str,
    name: str,
    *,
    storage_class: str = "",
    volume: str | None = None,
    size: str = "1Gi",
    **metadata: Any,
) -> dict[str, Any]:
    """A ReadWriteOnce PersistentVolumeClaim of `storage_class`, for `volume` if named."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
        "storageClassName": storage_class,
    }
    if volume is not None:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "spec": spec,
    }


def waiting_class_manifest(name: str, provisioner: str = NO_PROVISIONER, **fields: Any) -> dict[str, Any]:
    """A StorageClass whose claims wait for their first consumer (WaitForFirstConsumer)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
        **fields,
    }
