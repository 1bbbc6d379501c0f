"""NodeInfo parsing and NodeUsage accounting."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.filters.fit import NodeResourcesFit
from promsched.scheduling.objects.fields import FieldError
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo, Taint
from promsched.scheduling.objects.pods import HostPort, PodInfo
from promsched.scheduling.objects.resources import ZERO_RESOURCES, QuantityError, Resources
from support.objects import GIB, node_object, pod_info, requesting_pod

NODE: dict[str, Any] = {
    "metadata": {"name": "worker-1", "resourceVersion": "7", "labels": {"zone": "a", "gpu": "true"}},
    "spec": {
        "unschedulable": True,
        "taints": [
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "effect": "NoExecute",
                "timeAdded": "2025-01-01T00:00:00Z",
            },
        ],
    },
    "status": {
        "allocatable": {
            "cpu": "3920m",
            "memory": "15Gi",
            "ephemeral-storage": "100Gi",
            "pods": "58",
            "nvidia.com/gpu": "4",
            "hugepages-2Mi": "1Gi",
        },
        "conditions": [
            {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2025-01-01T00:00:00Z"},
            {"type": "Ready", "status": "True"},
        ],
        "addresses": [
            {"type": "InternalIP", "address": "10.0.0.5"},
            {"type": "InternalIP", "address": "fd00::5"},
            {"type": "Hostname", "address": "worker-1"},
        ],
    },
}


def test_from_object() -> None:
    node = NodeInfo.from_object(NODE)
    assert node.name == "worker-1"
    assert node.resource_version == "7"
    assert dict(node.labels) == {"zone": "a", "gpu": "true"}
    assert node.taints == (
        Taint("dedicated", "gpu", "NoSchedule"),
        Taint("node.kubernetes.io/not-ready", "", "NoExecute"),
    )
    assert node.unschedulable
    assert node.ready
    assert dict(node.conditions) == {"MemoryPressure": "False", "Ready": "True"}
    assert node.allocatable == Resources(
        3920, 15 * GIB, 100 * GIB, {"nvidia.com/gpu": 4, "hugepages-2Mi": GIB}
    )
    assert node.allocatable_pods == 58
    assert dict(node.addresses) == {"InternalIP": "10.0.0.5", "Hostname": "worker-1"}  # first of each type


def test_bare_node() -> None:
    node = NodeInfo.from_object({"metadata": {"name": "n"}})
    assert (node.taints, node.unschedulable, node.ready) == ((), False, False)
    assert node.allocatable == ZERO_RESOURCES
    assert node.allocatable_pods == 0  # as kube: no allocatable.pods is room for no pod


@pytest.mark.parametrize(("status", "ready"), [("True", True), ("False", False), ("Unknown", False)])
def test_ready(status: str, ready: bool) -> None:
    node = NodeInfo.from_object(
        {"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": status}]}}
    )
    assert node.ready is ready


def test_heartbeats_do_not_change_the_node() -> None:
    conditions = [{**condition, "lastHeartbeatTime": "later"} for condition in NODE["status"]["conditions"]]
    beat: dict[str, Any] = {**NODE, "status": {**NODE["status"], "conditions": conditions}}
    assert NodeInfo.from_object(beat) == NodeInfo.from_object(NODE)


@pytest.mark.parametrize(
    ("obj", "error", "path"),
    [
        (
            {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "four"}}},
            QuantityError,
            "status.allocatable.cpu",
        ),
        (
            {"metadata": {"name": "n"}, "status": {"allocatable": {"pods": "many"}}},
            QuantityError,
            "status.allocatable.pods",
        ),
        ({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "a"}]}}, FieldError, "spec.taints[0]"),
        ({"metadata": {"name": "n"}, "spec": {"taints": "a=b:NoSchedule"}}, FieldError, "spec.taints"),
        ({"metadata": {"name": "n", "labels": ["a"]}}, FieldError, "metadata.labels"),
    ],
)
def test_malformed_node_names_the_field(obj: dict[str, Any], error: type[Exception], path: str) -> None:
    with pytest.raises(error) as raised:
        NodeInfo.from_object(obj)
    assert str(raised.value).startswith(f"{path}:")


def gpu_pod(name: str, cpu: int, *ports: HostPort) -> PodInfo:
    return requesting_pod(name, cpu=cpu, scalars={"nvidia.com/gpu": 1}, host_ports=frozenset(ports))


def test_usage_adds_and_removes_pods() -> None:
    usage = NodeUsage()
    web, api = gpu_pod("web", 500, HostPort("TCP", "0.0.0.0", 80)), gpu_pod("api", 250)
    usage.add(web)
    usage.add(api)
    assert usage.requested == Resources(750, 2 * GIB, 0, {"nvidia.com/gpu": 2})
    assert usage.pods == 2
    assert set(usage.host_ports) == {HostPort("TCP", "0.0.0.0", 80)}
    usage.remove(web)
    assert usage.requested == Resources(250, GIB, 0, {"nvidia.com/gpu": 1})
    assert usage.pods == 1
    assert not usage.host_ports
    usage.remove(api)
    assert usage == NodeUsage()


def test_a_port_declared_twice_stays_taken_until_both_pods_leave() -> None:
    port = HostPort("UDP", "10.0.0.1", 53)
    usage = NodeUsage()
    first, second = gpu_pod("a", 0, port), gpu_pod("b", 0, port)
    usage.add(first)
    usage.add(second)
    usage.remove(first)
    assert set(usage.host_ports) == {port}
    usage.remove(second)
    assert not usage.host_ports


def test_a_node_without_allocatable_pods_has_room_for_none() -> None:
    node = NodeInfo.from_object(node_object("n", allocatable={"cpu": "4", "memory": "16Gi"}))
    status = NodeResourcesFit().filter(pod_info("p"), node, NodeUsage())
    assert status is not None
    assert status.reason == "Too many pods"
