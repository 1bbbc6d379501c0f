"""What a pod requests, as kube-scheduler 1.37 counts it: its containers' requests from the spec, and,
while an in-place resize is under way, from what the kubelet allocated and actuated (the containers'
statuses, or the pod-level status), with pod-level requests and overhead."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from promsched.scheduling.objects.fields import list_field, object_field
from promsched.scheduling.objects.resources import (
    CPU,
    HUGEPAGES_PREFIX,
    MEMORY,
    ZERO_RESOURCES,
    Resources,
    container_requests,
    resources_from_list,
)

# How one container's requests are read: from the container, its status (None: it has none), and
# whether the pod's resize is infeasible.
_ContainerReading = Callable[[Mapping[str, Any], str, "_Status | None", bool], Resources]


@dataclass(frozen=True, slots=True)
class _Status:
    """A container's status entry and its field path."""

    fields: Mapping[str, Any]
    path: str


def pod_requests(spec: Mapping[str, Any], status: Mapping[str, Any] | None = None) -> Resources:
    """What a pod requests, as kube-scheduler 1.37 counts it (component-helpers' PodRequests with status
    resources: in-place resize is on by default since 1.33).

    The app containers and restartable init containers ("sidecars", restartPolicy Always) run together,
    so they add up. Each other init container runs alone beside the sidecars started before it. The pod
    needs the larger of the two for each resource.

    A resize may leave a bound pod's containers running with other requests than its spec says: this is
    counted three ways, from the spec, from what the kubelet allocated
    (``status.containerStatuses[].allocatedResources``) and from what it actuated
    (``status.containerStatuses[].resources.requests``), each over the whole pod as above, and the pod
    takes the larger of the three per resource. While the resize is infeasible (condition
    PodResizePending, reason Infeasible) the spec is left out: the pod keeps what it runs with.

    Then pod-level requests (spec.resources) replace the containers' cpu, memory and hugepages, and
    spec.overhead is added.
    """
    status = status or {}
    spec_total = _aggregate(spec, {}, _spec_requests, infeasible=False)
    statuses = _container_statuses(status)
    infeasible = _resize_infeasible(status)
    containers = spec_total
    if _resized(spec, statuses) or infeasible or _has_pod_level_status(status):
        allocated, actuated = _status_totals(spec, status, statuses, infeasible)
        containers = allocated.max_per_resource(actuated)
        if not infeasible:
            containers = containers.max_per_resource(spec_total)
    total = _with_pod_level(containers, spec, status, infeasible)
    return total + _overhead(spec)


def _resized(spec: Mapping[str, Any], statuses: Mapping[str, _Status]) -> bool:
    """Whether a container's status reports other requests than its spec."""
    # Without any status value each reading is the spec (a pod not started, or not on a kubelet that
    # reports them): only the spec needs summing.
    with_values = any(
        entry.fields.get("allocatedResources") is not None or entry.fields.get("resources") is not None
        for entry in statuses.values()
    )
    # Nor when each container's status reports its spec's requests (no resize under way, a running
    # pod's usual status): allocated and actuated are then at most the spec's, resource by resource.
    return with_values and not _statuses_report_spec(spec, statuses)


def _statuses_report_spec(spec: Mapping[str, Any], statuses: Mapping[str, _Status]) -> bool:
    """Whether every container's status that gives allocatedResources or resources.requests gives
    exactly its spec's resources.requests (as decoded: the same quantities, written the same way)."""
    for field_name in ("containers", "initContainers"):
        for container in list_field(spec.get(field_name), f"spec.{field_name}"):
            found = statuses.get(container.get("name") or "")
            if found is None:
                continue
            resources = container.get("resources")
            requests = resources.get("requests") if isinstance(resources, dict) else None
            allocated = found.fields.get("allocatedResources")
            if allocated is not None and allocated != requests:
                return False
            actuated = found.fields.get("resources")
            if actuated is not None and (
                not isinstance(actuated, dict)
                or (actuated.get("requests") is not None and actuated.get("requests") != requests)
            ):
                return False
    return True


def requests_status_key(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[object, ...]:
    """What of a pod's status `pod_requests` reads with `spec` (keep the two in step): for the same spec,
    statuses with equal keys give equal requests. A status that leaves the spec's requests as they are
    (none of the containers' reports differ from the spec, no resize infeasible, no pod-level status: a
    pod pending, or running as the kubelet started it) has the empty key, as no status has."""
    statuses = _container_statuses(status)
    if not (_resize_infeasible(status) or status.get("resources") is not None or _resized(spec, statuses)):
        return ()
    return (
        *(
            (entry.get("name"), entry.get("allocatedResources"), entry.get("resources"))
            for field_name in ("containerStatuses", "initContainerStatuses")
            for entry in list_field(status.get(field_name), f"status.{field_name}")
        ),
        _resize_infeasible(status),
        status.get("allocatedResources"),
        status.get("resources"),
    )


def _overhead(spec: Mapping[str, Any]) -> Resources:
    return resources_from_list(object_field(spec.get("overhead"), "spec.overhead"), "spec.overhead")


def _aggregate(
    spec: Mapping[str, Any], statuses: Mapping[str, _Status], reading: _ContainerReading, *, infeasible: bool
) -> Resources:
    """The pod's requests with each container's read by `reading`: app containers and sidecars add up,
    each other init container runs beside the sidecars before it, and the pod needs the larger."""
    running = ZERO_RESOURCES
    for index, container in enumerate(list_field(spec.get("containers"), "spec.containers")):
        found = statuses.get(container.get("name") or "")
        running += reading(container, f"spec.containers[{index}]", found, infeasible)
    sidecars = ZERO_RESOURCES
    init_peak = ZERO_RESOURCES
    for index, container in enumerate(list_field(spec.get("initContainers"), "spec.initContainers")):
        found = statuses.get(container.get("name") or "")
        requests = reading(container, f"spec.initContainers[{index}]", found, infeasible)
        if container.get("restartPolicy") == "Always":
            running += requests
            sidecars += requests
            while_initialising = sidecars
        else:
            while_initialising = requests + sidecars
        init_peak = init_peak.max_per_resource(while_initialising)
    return running.max_per_resource(init_peak)


def _container_statuses(status: Mapping[str, Any]) -> dict[str, _Status]:
    """Container statuses by container name; an app container's wins over an init container's of the
    same name, as kube looks them up."""
    found: dict[str, _Status] = {}
    for field_name in ("containerStatuses", "initContainerStatuses"):
        for index, entry in enumerate(list_field(status.get(field_name), f"status.{field_name}")):
            found.setdefault(entry.get("name") or "", _Status(entry, f"status.{field_name}[{index}]"))
    return found


def _resize_infeasible(status: Mapping[str, Any]) -> bool:
    """Whether the pod's PodResizePending condition says Infeasible (kube's IsPodResizeInfeasible)."""
    for condition in list_field(status.get("conditions"), "status.conditions"):
        if condition.get("type") == "PodResizePending":
            return condition.get("reason") == "Infeasible"
    return False


def _has_pod_level_status(status: Mapping[str, Any]) -> bool:
    return status.get("allocatedResources") is not None and _status_requests(status, "status") is not None


def _status_requests(status: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    """``resources.requests`` of a pod or container status at `path`; None when it is not there."""
    requests = object_field(status.get("resources"), f"{path}.resources").get("requests")
    return None if requests is None else object_field(requests, f"{path}.resources.requests")


def _status_totals(
    spec: Mapping[str, Any], status: Mapping[str, Any], statuses: Mapping[str, _Status], infeasible: bool
) -> tuple[Resources, Resources]:
    """What the kubelet allocated to the pod's containers and what it actuated. The pod-level status
    (kube 1.36+, both status.allocatedResources and status.resources.requests) holds both summed
    already; otherwise each container's status is read."""
    if _has_pod_level_status(status):
        allocated = object_field(status["allocatedResources"], "status.allocatedResources")
        actuated = _status_requests(status, "status") or {}
        return (
            resources_from_list(allocated, "status.allocatedResources"),
            resources_from_list(actuated, "status.resources.requests"),
        )
    return (
        _aggregate(spec, statuses, _allocated_requests, infeasible=infeasible),
        _aggregate(spec, statuses, _actuated_requests, infeasible=infeasible),
    )


def _spec_requests(
    container: Mapping[str, Any], path: str, status: _Status | None, infeasible: bool
) -> Resources:
    return container_requests(container, path)


def _allocated_requests(
    container: Mapping[str, Any], path: str, status: _Status | None, infeasible: bool
) -> Resources:
    """The container's allocatedResources; without them its spec, or nothing while a resize is
    infeasible."""
    if status is not None and status.fields.get("allocatedResources") is not None:
        allocated = object_field(status.fields["allocatedResources"], f"{status.path}.allocatedResources")
        return resources_from_list(allocated, f"{status.path}.allocatedResources")
    return ZERO_RESOURCES if infeasible else container_requests(container, path)


def _actuated_requests(
    container: Mapping[str, Any], path: str, status: _Status | None, infeasible: bool
) -> Resources:
    """The requests the container runs with (status resources.requests); without them, as allocated."""
    requests = None if status is None else _status_requests(status.fields, status.path)
    if status is not None and requests is not None:
        return resources_from_list(requests, f"{status.path}.resources.requests")
    return _allocated_requests(container, path, status, infeasible)


def _is_pod_level_resource(name: str) -> bool:
    return name in (CPU, MEMORY) or name.startswith(HUGEPAGES_PREFIX)


def _with_pod_level(
    containers: Resources, spec: Mapping[str, Any], status: Mapping[str, Any], infeasible: bool
) -> Resources:
    """Pod-level requests in place of the containers' cpu, memory and hugepages (kube 1.34+). Once the
    pod has a pod-level status (kube 1.36+ resizes pod-level resources in place), they are the larger of
    the spec (left out while a resize is infeasible), status.resources.requests and
    status.allocatedResources, as kube 1.37's PodRequests takes them."""
    pod_level = object_field(spec.get("resources"), "spec.resources")
    requests = object_field(pod_level.get("requests"), "spec.resources.requests")
    supported = {name: value for name, value in requests.items() if _is_pod_level_resource(name)}
    if not supported:
        return containers
    names = set(supported)
    effective = resources_from_list(supported, "spec.resources.requests")
    if status.get("resources") is not None:
        if infeasible:
            names, effective = set(), ZERO_RESOURCES
        for path, listed in (
            ("status.resources.requests", _status_requests(status, "status")),
            ("status.allocatedResources", status.get("allocatedResources")),
        ):
            listed = object_field(listed, path)
            names.update(name for name in listed if _is_pod_level_resource(name))
            effective = effective.max_per_resource(resources_from_list(listed, path))
    hugepages = {name: effective.scalars.get(name, 0) for name in names if name.startswith(HUGEPAGES_PREFIX)}
    return replace(
        containers,
        milli_cpu=effective.milli_cpu if CPU in names else containers.milli_cpu,
        memory=effective.memory if MEMORY in names else containers.memory,
        scalars={**containers.scalars, **hugepages},
    )
