"""Kubernetes objects as the tests build them: nodes, pods, claims, volumes and storage classes as the API
returns them (dicts), and the scheduler's parsed `NodeInfo` and `PodInfo` of them.

Defaults make a plain case: a Ready node `n1` in zone-a with 4 CPUs and 16 GiB, a pending pod in
namespace `ns` for promsched asking for 100m and 64Mi. Every object has resourceVersion 1, as a first
list would show it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.resources import Resources

GIB = 1024**3
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node_object(
    name: str = "n1",
    zone: str | None = "zone-a",
    *,
    labels: Mapping[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: str | None = "True",
    cpu: str = "4",
    allocatable: Mapping[str, str] | None = None,
    address: str | None = None,
    version: str = "1",
) -> dict[str, Any]:
    """A node labelled with its hostname and zone (`zone=None`: none); `allocatable` replaces the whole
    list, `ready=None` leaves out the Ready condition, `address` is its InternalIP."""
    all_labels = {HOSTNAME: name, **({ZONE: zone} if zone else {}), **(labels or {})}
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {
        "allocatable": dict(allocatable or {"cpu": cpu, "memory": "16Gi", "pods": "110"}),
        "conditions": [] if ready is None else [{"type": "Ready", "status": ready}],
    }
    if address is not None:
        status["addresses"] = [{"type": "InternalIP", "address": address}]
    return {
        "metadata": {"name": name, "resourceVersion": version, "labels": all_labels},
        "spec": spec,
        "status": status,
    }


def node(name: str = "n1", zone: str | None = "zone-a", **options: Any) -> NodeInfo:
    return NodeInfo.from_object(node_object(name, zone, **options))


def hostname_in(*nodes: str) -> dict[str, Any]:
    """A pod's affinity that requires one of `nodes`."""
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": list(nodes)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def pod_uid(name: str, namespace: str = "ns") -> str:
    """`uid-NAME`; outside namespace `ns`, `uid-NAMESPACE-NAME`, so same-named pods differ."""
    return f"uid-{name}" if namespace == "ns" else f"uid-{namespace}-{name}"


def pod_object(
    name: str = "p",
    namespace: str = "ns",
    /,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_name: str = "",
    cpu: str = "100m",
    created: str = "",
    deleting: bool = False,
    version: str = "1",
    **spec: Any,
) -> dict[str, Any]:
    """A pod for promsched; `spec` adds or replaces spec fields (camelCase, as in the API).

    With `node_name` it is bound and long running: its load is in the metrics, not a recent placement.
    A `nodeName` given in `spec` instead leaves it Pending, as a pod looks just after its binding.
    """
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": pod_uid(name, namespace),
        "resourceVersion": version,
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if created:
        metadata["creationTimestamp"] = created
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": metadata,
        "spec": {
            "schedulerName": "promsched",
            **({"nodeName": node_name} if node_name else {}),
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
            **spec,
        },
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
        if node_name
        else {"phase": "Pending"},
    }


def pod(name: str = "p", namespace: str = "ns", /, **options: Any) -> PodInfo:
    return PodInfo.from_object(pod_object(name, namespace, **options))


def pod_info(name: str, namespace: str = "ns", **fields: Any) -> PodInfo:
    """A `PodInfo` made directly, for tests of what holds pods rather than of parsing them."""
    return PodInfo(namespace, name, **{"uid": pod_uid(name, namespace), **fields})


def requesting_pod(
    name: str, node_name: str = "", cpu: int = 1000, memory: int = GIB, **fields: Any
) -> PodInfo:
    """A `PodInfo` made directly, requesting `cpu` millicores and `memory` bytes, on `node_name` if given."""
    requests = Resources(cpu, memory, 0, fields.pop("scalars", {}))
    return pod_info(name, node_name=node_name, requests=requests, **fields)


def claim_object(
    name: str = "data",
    volume: str = "pv-data",
    *,
    namespace: str = "ns",
    bound: bool = True,
    storage_class: str | None = "",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    **metadata: Any,
) -> dict[str, Any]:
    """A PersistentVolumeClaim, bound to `volume` unless `bound` is off; `storage_class=None` leaves
    the field out (the cluster's default class applies)."""
    annotations = {"pv.kubernetes.io/bind-completed": "yes"} if bound else {}
    spec: dict[str, Any] = {"accessModes": list(modes), "volumeName": volume}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations, **metadata},
        "spec": spec,
        "status": {"phase": "Bound" if bound else "Pending"},
    }


def volume_object(
    name: str = "pv-data", *, on: str | None = None, csi: str | None = None, **labels: str
) -> dict[str, Any]:
    """A PersistentVolume; `on` pins it to one node by hostname, as a local volume is; `csi` names the
    CSI driver it is a volume of (its handle is its name)."""
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}}
    if csi is not None:
        spec["csi"] = {"driver": csi, "volumeHandle": name}
    if on is not None:
        term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [on]}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def csi_node_object(name: str = "n1", **counts: int | None) -> dict[str, Any]:
    """A node's CSINode: each driver (by keyword; `_` for `.`) with its allocatable count (None: no
    count)."""
    drivers = [
        {"name": driver.replace("_", "."), "nodeID": name}
        | ({} if count is None else {"allocatable": {"count": count}})
        for driver, count in counts.items()
    ]
    return {"metadata": {"name": name}, "spec": {"drivers": drivers}}


def volume_attachment_object(name: str, node: str, volume: str, attacher: str) -> dict[str, Any]:
    """A VolumeAttachment: `attacher` attaches the PersistentVolume `volume` to `node`."""
    return {
        "metadata": {"name": name},
        "spec": {"attacher": attacher, "nodeName": node, "source": {"persistentVolumeName": volume}},
    }


def storage_class_object(name: str, mode: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "provisioner": "example.com/disk", "volumeBindingMode": mode}
