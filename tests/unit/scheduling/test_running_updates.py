"""A bound pod's status update that changes nothing counted (the kubelet reporting it Running) is held in
the cache as the pod's latest state without counting it again (issue 43); any change the cache counts
still is, exactly as a cache built afresh from the pod's latest state counts it."""

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


class NoRequests:
    async def send(self, request: Request) -> Any:
        raise AssertionError(f"no request expected: {request}")


def intake_of(cache: ClusterCache) -> Intake:
    return Intake(
        NoRequests(),
        cache,
        SchedulingQueue(),
        schedules=lambda _pod: True,
        refuse=lambda *_: None,
        spawn=lambda _: None,
    )


def just_bound() -> dict[str, Any]:
    """A pod as its binding leaves it (Pending on its node), with what the cache counts and indexes:
    labels, host ports, a claim, required anti-affinity and preferred affinity."""
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
    obj = pod_object(
        "web-0",
        labels={"app": "web"},
        nodeName="n1",
        affinity={
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]
            },
        },
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    )
    obj["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    obj["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return obj


def later(obj: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    change(changed)
    changed["metadata"]["resourceVersion"] = str(int(changed["metadata"]["resourceVersion"]) + 1)
    return changed


def running(obj: dict[str, Any]) -> None:
    """What the kubelet reports once the pod runs: its containers with what they were given."""
    container = obj["spec"]["containers"][0]
    obj["status"] = {
        "phase": "Running",
        "startTime": "2026-01-01T00:00:05Z",
        "podIP": "10.1.0.1",
        "conditions": [{"type": kind, "status": "True"} for kind in ("Initialized", "Ready", "PodScheduled")],
        "containerStatuses": [
            {
                "name": container["name"],
                "ready": True,
                "state": {"running": {"startedAt": "2026-01-01T00:00:05Z"}},
                "allocatedResources": container["resources"]["requests"],
                "resources": container["resources"],
            }
        ],
    }


def counts(cache: ClusterCache) -> dict[str, object]:
    """Everything the cache counts and indexes of its pods."""
    return {
        "counted": cache.counted,
        "usage": {  # the nodes whose pods were all uncounted keep an empty usage
            node: (usage.requested, usage.pods, dict(usage.host_ports))
            for node, usage in cache.usage.items()
            if usage.pods
        },
        "node_pods": cache.node_pods,
        "label_index": cache.label_index,
        "repelling": cache.repelling,
        "with_scored_terms": cache.with_scored_terms,
        "claim_users": cache.claim_users,
        "claim_pods": cache.claim_pods,
    }


def fresh_counts(obj: dict[str, Any]) -> dict[str, object]:
    """What a cache that saw the pod in this state alone counts."""
    cache = ClusterCache()
    intake_of(cache).on_event(PODS, "ADDED", obj)
    return counts(cache)


def test_a_running_update_holds_the_pods_latest_state_without_counting_it_again() -> None:
    cache = ClusterCache()
    intake = intake_of(cache)
    bound = just_bound()
    intake.on_bound_pod("ADDED", bound)
    uid = bound["metadata"]["uid"]
    held = cache.counted[uid][1]
    usage_changes = cache.usage_changes.count

    update = later(bound, running)
    intake.on_bound_pod("MODIFIED", update)

    pod = cache.counted[uid][1]
    assert pod == PodInfo.from_object(update)
    assert (pod.phase, pod.resource_version) == ("Running", "2")
    assert pod.started_at is not None
    assert counts(cache) == fresh_counts(update)
    assert cache.node_pods["n1"][uid] is pod
    assert cache.claim_pods["n1"][uid] is pod
    # Placed just now (its binding), it is estimated from its latest state.
    assert [placement.pod for placement in cache.placements["n1"]] == [pod]
    # Its requests are taken from its last state, and no node's usage changed: nothing was recounted.
    assert pod.requests is held.requests
    assert cache.usage_changes.count == usage_changes


def test_the_binding_of_an_assumed_pod_holds_its_bound_state_without_counting_it_again() -> None:
    cache = ClusterCache()
    intake = intake_of(cache)
    unbound = just_bound()
    del unbound["spec"]["nodeName"]
    bound = later(unbound, lambda binding: binding["spec"].update(nodeName="n1"))
    intake.on_event(PODS, "ADDED", unbound)
    uid = bound["metadata"]["uid"]
    cache.assume(intake.pending[uid], "n1")
    usage_changes = cache.usage_changes.count

    intake.on_bound_pod("ADDED", bound)

    assert cache.counted[uid] == ("n1", PodInfo.from_object(bound))
    assert uid not in cache.assumed
    assert counts(cache) == fresh_counts(bound)
    assert cache.usage_changes.count == usage_changes


def resized(obj: dict[str, Any]) -> None:
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "300m"


def allocated(obj: dict[str, Any]) -> None:
    obj["status"]["containerStatuses"][0]["allocatedResources"] = {"cpu": "500m", "memory": "64Mi"}


def actuated(obj: dict[str, Any]) -> None:
    obj["status"]["containerStatuses"][0]["resources"] = {"requests": {"cpu": "700m"}}


def relabelled(obj: dict[str, Any]) -> None:
    obj["metadata"]["labels"] = {"app": "db"}


def deleting(obj: dict[str, Any]) -> None:
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"


def moved(obj: dict[str, Any]) -> None:
    obj["spec"]["nodeName"] = "n2"


# Changes the cache counts, each after the pod runs.
COUNTED: dict[str, Callable[[dict[str, Any]], None]] = {
    "spec resize": resized,
    "allocatedResources": allocated,
    "actuated resources": actuated,
    "labels": relabelled,
    "deletionTimestamp": deleting,
    "nodeName": moved,
}


@pytest.mark.parametrize("change", COUNTED.values(), ids=COUNTED.keys())
def test_a_change_counted_after_the_pod_runs_is_counted_as_afresh(
    change: Callable[[dict[str, Any]], None],
) -> None:
    cache = ClusterCache()
    intake = intake_of(cache)
    obj = later(just_bound(), running)
    intake.on_bound_pod("ADDED", obj)
    usage_changes = cache.usage_changes.count

    update = later(obj, change)
    intake.on_bound_pod("MODIFIED", update)

    assert counts(cache) == fresh_counts(update)
    assert cache.usage_changes.count > usage_changes


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_running_pod_that_finishes_frees_its_node(phase: str) -> None:
    cache = ClusterCache()
    intake = intake_of(cache)
    obj = later(just_bound(), running)
    intake.on_bound_pod("ADDED", obj)

    intake.on_bound_pod("MODIFIED", later(obj, lambda finished: finished["status"].update(phase=phase)))

    assert counts(cache) == counts(ClusterCache())
    assert not cache.usage["n1"].host_ports


def test_requests_are_parsed_anew_once_a_status_reports_other_requests_than_the_spec() -> None:
    pending = PodInfo.from_object(just_bound())
    runs = later(just_bound(), running)
    reported = PodInfo.from_object(runs, pending)
    resizing = later(runs, allocated)

    assert reported.requests is pending.requests
    assert PodInfo.from_object(resizing, reported) == PodInfo.from_object(resizing)
    assert PodInfo.from_object(resizing, reported).requests.milli_cpu == 500
