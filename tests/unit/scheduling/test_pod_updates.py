"""A pod's later states parsed with the spec's parse of its last state (issue 21): what the last state
lends is only what the new state would give, so the cache follows every change the scheduler reads."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from promsched.kube.requests import Request
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.intake.following import Intake
from promsched.scheduling.intake.kinds import PODS
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.queues import SchedulingQueue
from support.objects import pod_object

CONTAINER_STATUS = {"name": "c", "ready": True, "state": {"running": {}}}


def bound_pod() -> dict[str, Any]:
    """A running pod whose spec uses most of what the scheduler parses from a spec."""
    obj = pod_object(
        "web-0",
        labels={"app": "web", "tier": "front"},
        node_name="n1",
        nodeSelector={"disk": "ssd"},
        tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
                ]
            }
        },
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["tier"],
            }
        ],
        volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "tmp", "emptyDir": {}},
        ],
    )
    obj["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    obj["status"]["conditions"] = [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]
    obj["status"]["containerStatuses"] = [dict(CONTAINER_STATUS)]
    return obj


def ready_flipped(obj: dict[str, Any]) -> None:
    obj["status"]["conditions"][0]["status"] = "False"
    obj["status"]["containerStatuses"][0]["ready"] = False
    obj["status"]["podIP"] = "10.0.0.9"


def resized(obj: dict[str, Any]) -> None:
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "300m"


def allocated(obj: dict[str, Any]) -> None:
    obj["status"]["containerStatuses"][0]["allocatedResources"] = {"cpu": "500m", "memory": "64Mi"}


def actuated(obj: dict[str, Any]) -> None:
    obj["status"]["containerStatuses"][0]["resources"] = {"requests": {"cpu": "700m"}}


def resize_infeasible(obj: dict[str, Any]) -> None:
    allocated(obj)
    obj["status"]["conditions"].append({"type": "PodResizePending", "status": "True", "reason": "Infeasible"})


def pod_level_status(obj: dict[str, Any]) -> None:
    obj["spec"]["resources"] = {"requests": {"cpu": "1"}}
    obj["status"]["allocatedResources"] = {"cpu": "2"}
    obj["status"]["resources"] = {"requests": {"cpu": "2"}}


def condition(kind: str, status: str, reason: str = "") -> Callable[[dict[str, Any]], None]:
    def add(obj: dict[str, Any]) -> None:
        others = [held for held in obj["status"]["conditions"] if held["type"] != kind]
        obj["status"]["conditions"] = [*others, {"type": kind, "status": status, "reason": reason}]

    return add


def setting(part: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def put(obj: dict[str, Any]) -> None:
        obj[part][key] = value

    return put


# Every change the scheduler reads, each one alone.
CHANGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "nodeName": setting("spec", "nodeName", "n2"),
    "phase": setting("status", "phase", "Succeeded"),
    "deletionTimestamp": setting("metadata", "deletionTimestamp", "2026-01-01T00:01:00Z"),
    "startTime": setting("status", "startTime", "2026-01-01T00:00:30Z"),
    "nominatedNodeName": setting("status", "nominatedNodeName", "n3"),
    "labels": setting("metadata", "labels", {"app": "web", "tier": "back"}),
    "mirror annotation": setting("metadata", "annotations", {"kubernetes.io/config.mirror": "x"}),
    "controller": setting(
        "metadata", "ownerReferences", [{"kind": "ReplicaSet", "name": "web", "controller": True}]
    ),
    "spec resize": resized,
    "allocatedResources": allocated,
    "actuated resources": actuated,
    "infeasible resize": resize_infeasible,
    "pod-level resources": pod_level_status,
    "PodScheduled": condition("PodScheduled", "False", "Unschedulable"),
    "DisruptionTarget": condition("DisruptionTarget", "True", "PreemptionByScheduler"),
    "tolerations": setting("spec", "tolerations", [{"key": "k", "operator": "Exists"}]),
    "schedulingGates": setting("spec", "schedulingGates", [{"name": "wait"}]),
    "nodeSelector": setting("spec", "nodeSelector", {"disk": "hdd"}),
    "priority": setting("spec", "priority", 100),
    "hostPort": lambda obj: obj["spec"]["containers"][0]["ports"][0].update(hostPort=9090),
    "volumes": setting("spec", "volumes", []),
}


def next_state(obj: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    change(changed)
    changed["metadata"]["resourceVersion"] = str(int(changed["metadata"]["resourceVersion"]) + 1)
    return changed


@pytest.mark.parametrize("change", [ready_flipped, CHANGES["nodeName"]], ids=["status", "binding"])
def test_an_update_of_status_or_node_takes_the_spec_parse_of_the_last_state(
    change: Callable[[dict[str, Any]], None],
) -> None:
    obj = bound_pod()
    last = PodInfo.from_object(obj)
    update = next_state(obj, change)

    pod = PodInfo.from_object(update, last)

    assert pod.resource_version == "2"
    assert pod == PodInfo.from_object(update)
    lent = ("node_selector", "tolerations", "pod_affinity", "spread_constraints", "claims", "requests")
    assert all(getattr(pod, field) is getattr(last, field) for field in lent)


def test_a_binding_that_labels_the_pod_takes_the_spec_parse_but_what_reads_the_labels() -> None:
    # The API server's binding copies the node's topology labels onto the pod (PodTopologyLabels
    # admission); here a label a spread constraint's matchLabelKeys reads changes with them.
    obj = bound_pod()
    del obj["spec"]["nodeName"]
    last = PodInfo.from_object(obj)
    update = next_state(obj, CHANGES["nodeName"])
    update["metadata"]["labels"] = {"app": "web", "tier": "back", "topology.kubernetes.io/zone": "z1"}

    pod = PodInfo.from_object(update, last)

    assert pod == PodInfo.from_object(update)
    assert pod.spread_constraints != last.spread_constraints
    lent = ("node_selector", "tolerations", "pod_affinity", "claims", "requests", "limits", "host_ports")
    assert all(getattr(pod, field) is getattr(last, field) for field in lent)


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_every_change_read_is_parsed_anew(change: Callable[[dict[str, Any]], None]) -> None:
    obj = bound_pod()
    last = PodInfo.from_object(obj)
    update = next_state(obj, change)

    pod = PodInfo.from_object(update, last)

    assert not pod.same_state(last)
    assert pod == PodInfo.from_object(update)


def test_the_cache_follows_each_state_of_a_pod() -> None:
    class NoRequests:
        async def send(self, request: Request) -> Any:
            raise AssertionError(f"no request expected: {request}")

    cache, queue = ClusterCache(), SchedulingQueue()
    intake = Intake(
        NoRequests(), cache, queue, schedules=lambda _pod: True, refuse=lambda *_: None, spawn=lambda _: None
    )
    obj = bound_pod()
    uid = obj["metadata"]["uid"]
    intake.on_event(PODS, "ADDED", obj)
    for name in ("spec resize", "allocatedResources", "labels", "deletionTimestamp", "phase"):
        for change in (ready_flipped, CHANGES[name]):  # a state that changes nothing read, then one that does
            obj = next_state(obj, change)
            intake.on_event(PODS, "MODIFIED", obj)

        if name == "phase":
            assert uid not in cache.counted
        else:
            assert cache.counted[uid] == ("n1", PodInfo.from_object(obj)), name
