"""API objects for volume binding tests: claims that wait for their first consumer, volumes available to
bind, classes that provision, CSI drivers and their storage capacities."""

from __future__ import annotations

from typing import Any, Final

from support.objects import HOSTNAME

LOCAL: Final = "local"  # a class without a provisioner (local volumes)
DYNAMIC: Final = "dynamic"  # a class whose CSI driver provisions
DRIVER: Final = "disk.csi.example.com"


def waiting_claim(
    name: str = "data",
    storage_class: str = LOCAL,
    *,
    size: str | None = "1Gi",
    version: int = 1,
    selected_node: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """An unbound claim, as a StatefulSet's volumeClaimTemplate makes it."""
    annotations = {} if selected_node is None else {"volume.kubernetes.io/selected-node": selected_node}
    resources = {"requests": {"storage": size}} if size is not None else {}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-claim-{name}",
            "resourceVersion": str(version),
            "annotations": annotations,
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": resources,
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def bound_claim(claim: dict[str, Any], volume: str, version: int) -> dict[str, Any]:
    """`claim` as the PersistentVolume controller leaves it once bound to `volume`."""
    metadata = {
        **claim["metadata"],
        "resourceVersion": str(version),
        "annotations": {**claim["metadata"]["annotations"], "pv.kubernetes.io/bind-completed": "yes"},
    }
    return {**claim, "metadata": metadata, "spec": {**claim["spec"], "volumeName": volume}}


def available_volume(
    name: str,
    on: str | None = None,
    *,
    size: str = "1Gi",
    storage_class: str = LOCAL,
    version: int = 1,
    phase: str = "Available",
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A PersistentVolume not bound yet; `on` pins it to one node, as a local volume is."""
    body: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": storage_class,
        **spec,
    }
    if on is not None:
        term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [on]}]}
        body["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    metadata = {"name": name, "resourceVersion": str(version), "labels": labels or {}}
    return {"metadata": metadata, "spec": body, "status": {"phase": phase}}


def waiting_class(
    name: str = LOCAL, provisioner: str = "kubernetes.io/no-provisioner", **fields: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
        **fields,
    }


def allowed_zones(label: str, *zones: str) -> list[dict[str, Any]]:
    return [{"matchLabelExpressions": [{"key": label, "values": list(zones)}]}]


def csi_driver(name: str = DRIVER, *, storage_capacity: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"storageCapacity": storage_capacity}}


def storage_capacity(
    name: str,
    zone_label: str,
    zone: str,
    *,
    capacity: str | None = None,
    maximum: str | None = None,
    storage_class: str = DYNAMIC,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": storage_class,
        "nodeTopology": {"matchLabels": {zone_label: zone}},
    }
    if capacity is not None:
        obj["capacity"] = capacity
    if maximum is not None:
        obj["maximumVolumeSize"] = maximum
    return obj
