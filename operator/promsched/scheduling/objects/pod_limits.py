"""What a pod's usage estimate reads from the pod object besides its requests: its CPU and memory limits
and its controller (the owner whose other pods are its siblings)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promsched.scheduling.objects.fields import list_field, object_field
from promsched.scheduling.objects.resources import CPU, MEMORY, ZERO_RESOURCES, Resources, parse_quantity


def _limit(resources: Mapping[str, Any], name: str, path: str) -> int | None:
    limits = object_field(resources.get("limits"), f"{path}.limits")
    if name not in limits:
        return None
    return parse_quantity(limits[name], f"{path}.limits.{name}", milli=name == CPU)


def pod_limits(spec: Mapping[str, Any]) -> Resources:
    """The pod's CPU and memory limits (0: unbounded). A pod-level limit (spec.resources.limits) holds;
    else the sum over the containers that run together (app containers and sidecars), when each of them
    sets one: a single container without a limit may use the whole node."""
    pod_level = object_field(spec.get("resources"), "spec.resources")
    running = [
        (f"spec.containers[{index}].resources", container)
        for index, container in enumerate(list_field(spec.get("containers"), "spec.containers"))
    ] + [
        (f"spec.initContainers[{index}].resources", container)
        for index, container in enumerate(list_field(spec.get("initContainers"), "spec.initContainers"))
        if container.get("restartPolicy") == "Always"
    ]
    amounts = {}
    for name in (CPU, MEMORY):
        total = _limit(pod_level, name, "spec.resources")
        if total is None and running:
            each = [
                _limit(object_field(container.get("resources"), path), name, path)
                for path, container in running
            ]
            total = None if None in each else sum(amount or 0 for amount in each)
        amounts[name] = total or 0
    if not any(amounts.values()):
        return ZERO_RESOURCES
    return Resources(milli_cpu=amounts[CPU], memory=amounts[MEMORY])


def controller_of(metadata: Mapping[str, Any]) -> str:
    """``Kind/name`` of the ownerReference with controller: true (a ReplicaSet, StatefulSet, Job...), or
    "" for a pod no controller owns."""
    for reference in list_field(metadata.get("ownerReferences"), "metadata.ownerReferences"):
        if reference.get("controller") is True:
            return f"{reference.get('kind') or ''}/{reference.get('name') or ''}"
    return ""
