"""The writes that bind a pod's volumes before the pod (kube-scheduler's VolumeBinding PreBind), and
those that take them back, built as data like `requests`.

kube-scheduler updates the whole object with the resourceVersion it read; a merge patch carrying that
resourceVersion has the same effect (409 Conflict when the object changed since) and needs no more of
the object than the cache keeps. Taking a write back tests that the field still holds what was
written (a JSON patch `test`), so a newer writer's value is never removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from promsched.kube.requests import MERGE_PATCH, Priority, Request

JSON_PATCH: Final = "application/json-patch+json"


def _pointer(key: str) -> str:
    """`key` as one JSON pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def _metadata(resource_version: int, annotations: Mapping[str, str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"annotations": dict(annotations)}
    if resource_version:
        metadata["resourceVersion"] = str(resource_version)
    return metadata


def bind_volume(
    volume: str,
    resource_version: int,
    claim_ref: Mapping[str, str],
    annotations: Mapping[str, str],
) -> Request:
    """Pre-bind a PersistentVolume to a claim (spec.claimRef); the PersistentVolume controller then
    binds the claim to it."""
    body = {"metadata": _metadata(resource_version, annotations), "spec": {"claimRef": dict(claim_ref)}}
    return Request("PATCH", f"/api/v1/persistentvolumes/{volume}", body, MERGE_PATCH, priority=Priority.HIGH)


def select_node(namespace: str, claim: str, resource_version: int, annotation: str, node: str) -> Request:
    """Ask the claim's provisioner for a volume reachable from `node` (the selected-node annotation)."""
    body = {"metadata": _metadata(resource_version, {annotation: node})}
    path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}"
    return Request("PATCH", path, body, MERGE_PATCH, priority=Priority.HIGH)


def unbind_volume(volume: str, claim_uid: str, annotation: str | None) -> Request:
    """Take back a pre-binding: the claimRef (if it still names the claim) and `annotation` if given."""
    operations: list[dict[str, Any]] = [
        {"op": "test", "path": "/spec/claimRef/uid", "value": claim_uid},
        {"op": "remove", "path": "/spec/claimRef"},
    ]
    if annotation is not None:
        operations.append({"op": "remove", "path": f"/metadata/annotations/{_pointer(annotation)}"})
    return Request("PATCH", f"/api/v1/persistentvolumes/{volume}", operations, JSON_PATCH)


def unselect_node(namespace: str, claim: str, annotation: str, node: str) -> Request:
    """Take back a selected node, if the claim still names it."""
    path = f"/metadata/annotations/{_pointer(annotation)}"
    operations = [{"op": "test", "path": path, "value": node}, {"op": "remove", "path": path}]
    return Request(
        "PATCH", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}", operations, JSON_PATCH
    )
