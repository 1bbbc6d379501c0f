"""A resized pod's requests, as kube-scheduler counts them (component-helpers' PodRequests with status
resources): the larger of spec, allocated and actuated, each summed over the pod; an infeasible resize
counts at its status values."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.objects.fields import FieldError
from promsched.scheduling.objects.pod_requests import pod_requests
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.resources import Resources

GIB = 1024**3
INFEASIBLE = {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
DEFERRED = {"type": "PodResizePending", "status": "True", "reason": "Deferred"}


def container(name: str, cpu: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": {"cpu": cpu}}, **extra}


def container_status(
    name: str, *, allocated: str | None = None, actuated: str | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"name": name}
    if allocated is not None:
        status["allocatedResources"] = {"cpu": allocated}
    if actuated is not None:
        status["resources"] = {"requests": {"cpu": actuated}}
    return status


def test_a_pod_without_container_statuses_counts_its_spec() -> None:
    assert pod_requests({"containers": [container("a", "1")]}, {"phase": "Pending"}) == Resources(1000)


def test_statuses_that_report_the_spec_count_the_spec_with_limits_standing_in_for_requests() -> None:
    # A running pod's usual status: the kubelet allocated and runs what the spec requests. The spec's
    # memory limit stands in for its missing request; the statuses list only what was requested.
    spec = {
        "containers": [container("a", "1", resources={"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}})]
    }
    same = container_status("a", allocated="1", actuated="1")
    assert pod_requests(spec, {"containerStatuses": [same]}) == Resources(1000, GIB)
    other_words = container_status("a", allocated="1000m", actuated="1000m")
    assert pod_requests(spec, {"containerStatuses": [other_words]}) == Resources(1000, GIB)


def test_a_downsize_in_progress_counts_the_larger_running_requests() -> None:
    # The spec says 1 cpu; the kubelet still runs the container with 3 until the resize is actuated.
    spec = {"containers": [container("a", "1")]}
    status = {"containerStatuses": [container_status("a", allocated="1", actuated="3")]}
    assert pod_requests(spec, status) == Resources(3000)


def test_an_upsize_not_yet_allocated_counts_the_spec() -> None:
    spec = {"containers": [container("a", "4")]}
    status = {
        "containerStatuses": [container_status("a", allocated="2", actuated="2")],
        "conditions": [DEFERRED],
    }
    assert pod_requests(spec, status) == Resources(4000)


def test_an_infeasible_upsize_counts_the_status_values() -> None:
    spec = {"containers": [container("a", "64")]}
    status = {
        "containerStatuses": [container_status("a", allocated="2", actuated="1")],
        "conditions": [INFEASIBLE],
    }
    assert pod_requests(spec, status) == Resources(2000)


def test_an_infeasible_resize_counts_nothing_for_a_container_without_status_values() -> None:
    spec = {"containers": [container("a", "64"), container("b", "8")]}
    status = {"containerStatuses": [container_status("a", actuated="1")], "conditions": [INFEASIBLE]}
    assert pod_requests(spec, status) == Resources(1000)


def test_without_status_values_a_container_counts_its_spec() -> None:
    spec = {"containers": [container("a", "1"), container("b", "2")]}
    status = {"containerStatuses": [container_status("a", allocated="5")]}
    # allocated: 5 + 2 (b from its spec); actuated: a falls back to allocated 5, b to its spec 2.
    assert pod_requests(spec, status) == Resources(7000)


def test_the_three_readings_are_each_summed_before_the_larger_is_taken() -> None:
    # a is shrinking and b growing: per container the larger would be 3 + 3; kube sums each reading first.
    spec = {"containers": [container("a", "1"), container("b", "3")]}
    status = {
        "containerStatuses": [
            container_status("a", allocated="1", actuated="3"),
            container_status("b", allocated="3", actuated="1"),
        ]
    }
    assert pod_requests(spec, status) == Resources(4000)


def test_sidecars_and_init_containers_are_read_from_their_statuses() -> None:
    spec = {
        "initContainers": [container("init", "1"), container("sidecar", "1", restartPolicy="Always")],
        "containers": [container("app", "1")],
    }
    status = {
        "initContainerStatuses": [container_status("sidecar", allocated="1", actuated="2")],
        "containerStatuses": [container_status("app", allocated="1", actuated="1")],
    }
    assert pod_requests(spec, status) == Resources(3000)


def test_an_app_container_status_wins_over_an_init_container_status_of_the_same_name() -> None:
    spec = {"containers": [container("x", "1")]}
    status = {
        "containerStatuses": [container_status("x", actuated="2")],
        "initContainerStatuses": [container_status("x", actuated="9")],
    }
    assert pod_requests(spec, status) == Resources(2000)


def test_memory_and_cpu_take_the_larger_independently() -> None:
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}
    status = {
        "containerStatuses": [
            {
                "name": "a",
                "allocatedResources": {"cpu": "1", "memory": "2Gi"},
                "resources": {"requests": {"cpu": "1"}},
            }
        ]
    }
    assert pod_requests(spec, status) == Resources(2000, 2 * GIB)


def test_overhead_is_added_once_after_the_larger() -> None:
    spec = {"containers": [container("a", "1")], "overhead": {"cpu": "100m"}}
    status = {"containerStatuses": [container_status("a", allocated="2")]}
    assert pod_requests(spec, status) == Resources(2100)


def test_pod_level_requests_replace_the_containers_and_follow_a_pod_level_resize() -> None:
    spec = {
        "resources": {"requests": {"cpu": "2"}},
        "containers": [container("a", "500m")],
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec, {}) == Resources(2100)
    # A pod-level downsize from 4 in progress (kube 1.37 adds the overhead to the status values too).
    resizing = {"allocatedResources": {"cpu": "2"}, "resources": {"requests": {"cpu": "4"}}}
    assert pod_requests(spec, resizing) == Resources(4100)
    # Infeasible: the spec is left out.
    spec["resources"] = {"requests": {"cpu": "64"}}
    infeasible = {**resizing, "conditions": [INFEASIBLE]}
    assert pod_requests(spec, infeasible) == Resources(4100)
    # Without status.resources the pod-level spec stands.
    assert pod_requests(spec, {"allocatedResources": {"cpu": "2"}}) == Resources(64100)


@pytest.mark.parametrize(
    ("status", "path"),
    [
        (
            {"containerStatuses": [{"name": "a", "allocatedResources": {"cpu": "x"}}]},
            "status.containerStatuses[0].allocatedResources.cpu",
        ),
        (
            {"containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": "?"}}}]},
            "status.containerStatuses[0].resources.requests.cpu",
        ),
        (
            {"containerStatuses": [{"name": "a", "resources": ["cpu"]}]},
            "status.containerStatuses[0].resources",
        ),
        ({"containerStatuses": "a"}, "status.containerStatuses"),
    ],
)
def test_malformed_status_values_name_the_field(status: dict[str, Any], path: str) -> None:
    with pytest.raises(FieldError) as raised:
        pod_requests({"containers": [container("a", "1")]}, status)
    assert str(raised.value).startswith(f"{path}:")


def test_a_bound_pod_counts_its_status_values() -> None:
    pod = PodInfo.from_object(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"nodeName": "n1", "containers": [container("a", "1")]},
            "status": {
                "phase": "Running",
                "containerStatuses": [container_status("a", allocated="1", actuated="3")],
            },
        }
    )
    assert pod.requests == Resources(3000)
