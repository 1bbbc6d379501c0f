"""Kubernetes API requests, built as data and sent elsewhere (see `sending`), so each is testable alone."""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from promsched.api.policies import GROUP, PLURAL, VERSION

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class Priority(enum.IntEnum):
    """Which request goes first when several wait for the client's rate limit (see `throttling`)."""

    # Bindings, and the leader's lease: kube-scheduler renews its lease on a client of its own, so
    # renewals never queue behind scheduling writes; here they go first with the bindings.
    HIGH = 0
    NORMAL = 1


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: Any = None
    content_type: str = JSON
    params: Mapping[str, str] = field(default_factory=dict)
    priority: Priority = Priority.NORMAL


def now_rfc3339(micro: bool = False) -> str:
    moment = datetime.datetime.now(datetime.UTC)
    if micro:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def bind_pod(namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> Request:
    """POST pods/binding. The UID precondition makes a binding for a deleted-and-recreated pod fail (409)
    instead of placing the newcomer; the API server copies the binding's annotations onto the pod."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "annotations": dict(annotations)},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    return Request(
        "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body, priority=Priority.HIGH
    )


def get_version() -> Request:
    """GET /version: any client may read it (system:public-info-viewer), and it costs the API server
    next to nothing."""
    return Request("GET", "/version")


def patch_pod_condition(namespace: str, name: str, condition: Mapping[str, str]) -> Request:
    # Strategic merge patches merge pod conditions by `type`, leaving the others as they are.
    body = {"status": {"conditions": [dict(condition)]}}
    return Request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", body, STRATEGIC_MERGE_PATCH)


def patch_nominated_node(namespace: str, name: str, node: str) -> Request:
    """Set (or with "" clear) status.nominatedNodeName, as kube-scheduler patches it after preempting."""
    body = {"status": {"nominatedNodeName": node or None}}
    return Request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", body, STRATEGIC_MERGE_PATCH)


def evict_pod(namespace: str, name: str, uid: str) -> Request:
    """POST pods/eviction: the API server deletes the pod unless a PodDisruptionBudget forbids it (429).
    The UID precondition keeps a pod recreated under the same name from being evicted in its place."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}},
    }
    return Request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body)


def policy_path(name: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/{PLURAL}/{name}"


def patch_policy_status(name: str, status: Mapping[str, Any]) -> Request:
    return Request("PATCH", f"{policy_path(name)}/status", {"status": dict(status)}, MERGE_PATCH)


# Objects per list page: a page of nodes or pods is parsed whole, so pages bound the memory a listing
# takes at once (a node or pod with its managedFields is 4-5 KB of JSON, ~20 KB parsed).
LIST_PAGE_SIZE = 100


def list_objects(
    path: str,
    continue_token: str = "",
    params: Mapping[str, str] | None = None,
    limit: int = LIST_PAGE_SIZE,
) -> Request:
    """One page of a list (e.g. ``/api/v1/pods``); `sending.pages` follows ``metadata.continue``."""
    query = {**(params or {}), "limit": str(limit)}
    if continue_token:
        query["continue"] = continue_token
    return Request("GET", path, params=query)


def watch_objects(
    path: str, resource_version: str, params: Mapping[str, str], timeout_seconds: int
) -> Request:
    """A watch of `path` from `resource_version` ("": the current state first, as ADDED events), with
    bookmarks, which the API server ends after `timeout_seconds`, as client-go's reflector asks."""
    query = {**params, "watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout_seconds)}
    if resource_version:
        query["resourceVersion"] = resource_version
    return Request("GET", path, params=query)


def get_secret(namespace: str, name: str) -> Request:
    return Request("GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")


def lease_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"{base}/{name}" if name else base


def get_lease(namespace: str, name: str) -> Request:
    return Request("GET", lease_path(namespace, name), priority=Priority.HIGH)


def create_lease(namespace: str, name: str, spec: Mapping[str, Any]) -> Request:
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": dict(spec),
    }
    return Request("POST", lease_path(namespace), body, priority=Priority.HIGH)


def replace_lease(namespace: str, name: str, resource_version: str, spec: Mapping[str, Any]) -> Request:
    """PUT with the resourceVersion read: a concurrent writer makes it fail with 409, never overwrite."""
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": resource_version},
        "spec": dict(spec),
    }
    return Request("PUT", lease_path(namespace, name), body, priority=Priority.HIGH)
