"""Binding a pod's volumes before the pod (VolumeBinding's PreBind): the writes, the wait for the
PersistentVolume controller or the provisioner, and what a timeout or a conflict undoes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from promsched.api.fields import Mode
from promsched.api.statuses import Decision
from promsched.scheduling.binding.binding_pods import Assumed, Binder
from promsched.scheduling.binding.prebinding import VolumeBinder, VolumeBindingFailed
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.filters.volume_binding import plan_for
from promsched.scheduling.filters.volume_binding_plans import VolumePlan
from promsched.scheduling.intake.following import Intake
from promsched.scheduling.objects.volumes import ClaimInfo, VolumeInfo
from promsched.scheduling.policies.recording import PolicyStatus
from promsched.scheduling.policies.runtimes import PolicyRuntime
from promsched.scheduling.queues import SchedulingQueue, Where
from promsched.scheduling.reporting.reporting_pods import PodReporter
from support.clocks import Clock
from support.fake_apis import FakeSender
from support.objects import node, pod
from support.placement import cache_with
from support.volume_objects import (
    DRIVER,
    DYNAMIC,
    available_volume,
    bound_claim,
    waiting_claim,
    waiting_class,
)

PREBIND = 'running PreBind plugin "VolumeBinding": binding volumes: '
PV_PATH = "/api/v1/persistentvolumes/"
CLAIM_PATH = "/api/v1/namespaces/ns/persistentvolumeclaims/"


class Cluster:
    """The cache, the fake API, and what the cluster's controllers do while the binder polls: each
    action in `then` runs at the next poll."""

    def __init__(self, claims: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> None:
        classes = [waiting_class(), waiting_class(DYNAMIC, DRIVER)]
        self.cache: ClusterCache = cache_with(
            [node("n1"), node("n2")], claims=claims, volumes=volumes, storage_classes=classes
        )
        self.sender = FakeSender()
        self.clock = Clock(0.0)
        self.then: list[Callable[[], None]] = []
        self.polls = 0
        self.binder = VolumeBinder(self.sender, self.cache, sleep=self.sleep, clock=self.clock)

    async def sleep(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.polls += 1
        if self.then:
            self.then.pop(0)()

    def written_version(self, path: str, version: int) -> None:
        """What the API server answers a write of `path` with."""
        self.sender.answers[path] = {"metadata": {"resourceVersion": str(version)}}

    def plan(self, *claims: str, on: str = "n1") -> VolumePlan:
        volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
        plan = plan_for(pod("app", volumes=volumes), self.cache, self.cache.nodes[on])
        self.binder.assume(plan, on)
        return plan

    def watch(self, claim: dict[str, Any] | None = None, volume: dict[str, Any] | None = None) -> None:
        if volume is not None:
            self.cache.upsert_volume(VolumeInfo.from_object(volume))
        if claim is not None:
            self.cache.upsert_claim(ClaimInfo.from_object(claim))


def live() -> bool:
    return True


def pre_bound(volume: dict[str, Any], claim: str, version: int) -> dict[str, Any]:
    ref = {"namespace": "ns", "name": claim, "uid": f"uid-claim-{claim}"}
    spec = {**volume["spec"], "claimRef": ref}
    return {**volume, "metadata": {**volume["metadata"], "resourceVersion": str(version)}, "spec": spec}


async def test_a_chosen_volume_is_pre_bound_and_the_pod_waits_for_the_controller() -> None:
    volume = available_volume("pv-1", "n1", version=4)
    cluster = Cluster([waiting_claim()], [volume])
    cluster.written_version(PV_PATH + "pv-1", 10)
    plan = cluster.plan("data")
    assert cluster.cache.volume("pv-1").claim_ref is not None  # assumed at once
    cluster.then = [
        lambda: None,  # the controller has not got to it yet
        lambda: cluster.watch(bound_claim(waiting_claim(), "pv-1", 12), pre_bound(volume, "data", 11)),
    ]
    await cluster.binder.bind("n1", plan, live)
    [request] = cluster.sender.sent
    assert (request.method, request.path, request.content_type) == (
        "PATCH",
        PV_PATH + "pv-1",
        "application/merge-patch+json",
    )
    claim_ref = {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": "ns",
        "name": "data",
        "uid": "uid-claim-data",
        "resourceVersion": "1",
    }
    assert request.body == {
        "metadata": {"resourceVersion": "4", "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"claimRef": claim_ref},
    }
    assert cluster.polls == 2  # once a second, as kube checks
    assert cluster.cache.assumed_volumes == {}


async def test_a_claim_to_provision_gets_the_selected_node_and_waits_for_its_provisioner() -> None:
    claim = waiting_claim(storage_class=DYNAMIC)
    cluster = Cluster([claim], [])
    cluster.written_version(CLAIM_PATH + "data", 7)
    plan = cluster.plan("data", on="n2")
    assert cluster.cache.claim("ns", "data").selected_node == "n2"
    provisioned = pre_bound(available_volume("pvc-1", "n2", storage_class=DYNAMIC, version=8), "data", 8)
    selected = waiting_claim(storage_class=DYNAMIC, selected_node="n2")
    cluster.then = [lambda: cluster.watch(bound_claim(selected, "pvc-1", 9), provisioned)]
    await cluster.binder.bind("n2", plan, live)
    [request] = cluster.sender.sent
    assert request.path == CLAIM_PATH + "data"
    assert request.body == {
        "metadata": {"resourceVersion": "1", "annotations": {"volume.kubernetes.io/selected-node": "n2"}}
    }
    assert cluster.cache.assumed_claims == {}


async def test_the_watch_must_show_the_write_before_the_binding_counts() -> None:
    volume = available_volume("pv-1", "n1", version=4)
    cluster = Cluster([waiting_claim()], [volume])
    cluster.written_version(PV_PATH + "pv-1", 10)
    plan = cluster.plan("data")
    # The claim shows bound while the volume's state is still older than the write: not yet.
    cluster.then = [
        lambda: cluster.watch(bound_claim(waiting_claim(), "pv-1", 12)),
        lambda: cluster.watch(volume=pre_bound(volume, "data", 10)),
    ]
    await cluster.binder.bind("n1", plan, live)
    assert cluster.polls == 2


@pytest.mark.parametrize("limit", [600.0, 30.0])
async def test_a_binding_that_never_completes_times_out_and_is_taken_back(limit: float) -> None:
    volume = available_volume("pv-1", "n1", version=4)
    cluster = Cluster([waiting_claim("data"), waiting_claim("logs", storage_class=DYNAMIC)], [volume])
    cluster.binder.timeout = limit
    cluster.written_version(PV_PATH + "pv-1", 10)
    cluster.written_version(CLAIM_PATH + "logs", 11)
    plan = cluster.plan("data", "logs")
    cluster.then = [lambda: cluster.watch(volume=pre_bound(volume, "data", 10))]
    with pytest.raises(VolumeBindingFailed) as failure:
        await cluster.binder.bind("n1", plan, live)
    assert failure.value.message == (
        PREBIND + 'timed out waiting for persistentvolumeclaim "ns/data" to be bound'
    )
    assert limit <= cluster.clock.now < limit + 2
    unbind, unselect = cluster.sender.sent[2:]
    assert (unbind.path, unbind.content_type) == (PV_PATH + "pv-1", "application/json-patch+json")
    assert unbind.body == [
        {"op": "test", "path": "/spec/claimRef/uid", "value": "uid-claim-data"},
        {"op": "remove", "path": "/spec/claimRef"},
        {"op": "remove", "path": "/metadata/annotations/pv.kubernetes.io~1bound-by-controller"},
    ]
    selected = "/metadata/annotations/volume.kubernetes.io~1selected-node"
    assert unselect.path == CLAIM_PATH + "logs"
    assert unselect.body == [
        {"op": "test", "path": selected, "value": "n1"},
        {"op": "remove", "path": selected},
    ]
    assert cluster.cache.assumed_volumes == {}
    assert cluster.cache.assumed_claims == {}


async def test_a_conflict_names_the_claim_and_takes_back_what_was_written_before_it() -> None:
    volumes = [available_volume("pv-a", "n1"), available_volume("pv-b", "n1")]
    cluster = Cluster([waiting_claim("a"), waiting_claim("b")], volumes)
    cluster.sender.fail["/persistentvolumes/pv-b"] = 409
    plan = cluster.plan("a", "b")
    assert {binding.volume.name for binding in plan.bindings} == {"pv-a", "pv-b"}
    with pytest.raises(VolumeBindingFailed) as failure:
        await cluster.binder.bind("n1", plan, live)
    [(claim, _)] = [(b.claim.name, b.volume.name) for b in plan.bindings if b.volume.name == "pv-b"]
    assert failure.value.message == PREBIND + f'persistentvolumeclaim "ns/{claim}": refused'
    assert [(r.method, r.path, r.content_type) for r in cluster.sender.sent] == [
        ("PATCH", PV_PATH + "pv-a", "application/merge-patch+json"),
        ("PATCH", PV_PATH + "pv-b", "application/merge-patch+json"),
        ("PATCH", PV_PATH + "pv-a", "application/json-patch+json"),  # taken back
    ]
    assert cluster.polls == 0
    assert cluster.cache.assumed_volumes == {}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("gave-up", 'provisioning failed for PVC "data"'),
        ("pod-deleted", "pod does not exist any more"),
        ("node-deleted", 'failed to get node "n2": node "n2" not found'),
    ],
)
async def test_a_binding_that_can_no_longer_complete_fails_at_once(change: str, message: str) -> None:
    cluster = Cluster([waiting_claim(storage_class=DYNAMIC)], [])
    cluster.written_version(CLAIM_PATH + "data", 7)
    plan = cluster.plan("data", on="n2")
    alive = [True]
    actions = {
        # The provisioner removes the selected node when it cannot provision there.
        "gave-up": lambda: cluster.watch(waiting_claim(storage_class=DYNAMIC, version=8)),
        "pod-deleted": lambda: alive.clear(),
        "node-deleted": lambda: cluster.cache.remove_node("n2"),
    }
    cluster.then = [actions[change]]
    with pytest.raises(VolumeBindingFailed) as failure:
        await cluster.binder.bind("n2", plan, lambda: bool(alive))
    assert failure.value.message == PREBIND + message
    assert cluster.polls == 1
    taken_back = [r for r in cluster.sender.sent if r.content_type == "application/json-patch+json"]
    # The provisioner removed the annotation itself: nothing is left to take back.
    assert len(taken_back) == (0 if change == "gave-up" else 1)


# ----- in the binding cycle ---------------------------------------------------------------------------


def binder_for(cluster: Cluster) -> tuple[Binder, SchedulingQueue, PolicyRuntime, set[asyncio.Task[None]]]:
    tasks: set[asyncio.Task[None]] = set()

    def spawn(work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        tasks.add(task)
        return task

    queue = SchedulingQueue()
    volumes = [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]
    waiting = pod("app", volumes=volumes)
    queue.add_or_update(waiting)
    intake = Intake(
        cluster.sender, cluster.cache, queue, schedules=lambda _pod: True, refuse=lambda *_: None, spawn=spawn
    )
    intake.pending[waiting.uid] = waiting
    reporter = PodReporter(cluster.sender, intake.pending, spawn=spawn)
    binder = Binder(cluster.sender, cluster.cache, intake, reporter, spawn=spawn, concurrency=1)
    binder.volumes = cluster.binder
    runtime = PolicyRuntime("p", "2026-01-01T00:00:00Z", PolicyStatus(history=10))
    return binder, queue, runtime, tasks


def decision(node_name: str) -> Decision:
    return Decision(
        pod="ns/app", node=node_name, time=datetime.now(UTC), latency_ms=0, generation=1, mode=Mode.ENFORCE
    )


async def test_the_pod_is_bound_once_its_volumes_are_without_holding_a_binding_slot() -> None:
    volume = available_volume("pv-1", "n1", version=4)
    cluster = Cluster([waiting_claim()], [volume])
    cluster.written_version(PV_PATH + "pv-1", 10)
    binder, queue, runtime, tasks = binder_for(cluster)
    entry = queue.pop_nowait()
    assert entry is not None
    plan = plan_for(entry.pod, cluster.cache, cluster.cache.nodes["n1"])
    cluster.cache.assume(entry.pod, "n1")
    released = asyncio.Event()

    async def controller_binds(seconds: float) -> None:
        await released.wait()
        cluster.watch(bound_claim(waiting_claim(), "pv-1", 12), pre_bound(volume, "data", 11))

    cluster.binder.sleep = controller_binds
    binder.bind(Assumed(entry, runtime, decision("n1"), "n1", "{}", plan))
    assert cluster.cache.volume("pv-1").claim_ref is not None  # assumed in the cycle
    await asyncio.sleep(0)
    assert binder.room.is_set()  # other pods' cycles go on while the volumes bind
    assert not cluster.sender.bodies("/binding")
    released.set()
    while tasks:
        await asyncio.wait(list(tasks))
        tasks.difference_update([task for task in tasks if task.done()])
    [binding] = cluster.sender.bodies("/pods/app/binding")
    assert binding["target"]["name"] == "n1"


async def test_a_failed_volume_binding_requeues_the_pod_and_says_why() -> None:
    cluster = Cluster([waiting_claim()], [available_volume("pv-1", "n1")])
    cluster.sender.fail["/persistentvolumes/pv-1"] = 409
    binder, queue, runtime, tasks = binder_for(cluster)
    entry = queue.pop_nowait()
    assert entry is not None
    plan = plan_for(entry.pod, cluster.cache, cluster.cache.nodes["n1"])
    cluster.cache.assume(entry.pod, "n1")
    binder.bind(Assumed(entry, runtime, decision("n1"), "n1", "{}", plan))
    while tasks:
        await asyncio.wait(list(tasks))
        tasks.difference_update([task for task in tasks if task.done()])
    message = PREBIND + 'persistentvolumeclaim "ns/data": refused'
    assert cluster.cache.usage_of("n1").pods == 0
    assert queue.entries[entry.pod.uid].where is Where.BACKOFF
    [condition] = cluster.sender.bodies("/pods/app/status")
    assert condition["status"]["conditions"][0]["reason"] == "SchedulerError"
    assert condition["status"]["conditions"][0]["message"] == message
    [event] = cluster.sender.bodies("/namespaces/ns/events")
    assert (event["reason"], event["note"]) == ("FailedScheduling", message)
    assert not cluster.sender.bodies("/binding")
