"""The intake without a cluster: watch events in, lists read from a fake API server, the cache and the
queue as they would be after each (issue 16: deletes lost in a watch gap or undone by an old list)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from promsched.kube.requests import Request
from promsched.kube.sending import ApiError
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.intake.following import Intake
from promsched.scheduling.intake.kinds import (
    CLAIMS,
    CSI_DRIVERS,
    CSI_NODES,
    NAMESPACES,
    NODES,
    PODS,
    STORAGE_CAPACITIES,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
    VOLUMES,
    Kind,
)
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.selectors import parse_label_selector
from promsched.scheduling.queues import SchedulingQueue, Where
from promsched.scheduling.supervising import Supervisor
from support.clocks import Clock
from support.intakes import GRACE, RESYNC, ListServer, Setup, bound, build, drift
from support.objects import (
    ZONE,
    claim_object,
    csi_node_object,
    node_object,
    pod_object,
    storage_class_object,
    volume_attachment_object,
    volume_object,
)
from support.polling import eventually_async
from support.volume_objects import csi_driver, storage_capacity
from support.watchers import ScriptedWatcher, follow_until


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    ready = build()
    yield ready
    ready.background.stop()


def versioned(obj: dict[str, Any], version: int) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(version)
    return obj


def park(queue: SchedulingQueue, pod: PodInfo) -> None:
    queue.add_or_update(pod)
    entry = queue.pop_nowait()
    assert entry is not None
    queue.unschedulable(entry.pod.uid)


# ----- every kind, with a state that tells two versions apart and how the cache shows it ------------


@dataclass(frozen=True)
class KindCase:
    kind: Kind
    build: Callable[[str, int, str], dict[str, Any]]  # name, resourceVersion, a state marker
    shown: Callable[[ClusterCache, str], str | None]  # the marker of what the cache holds, or None

    @property
    def resource(self) -> str:
        return self.kind.plural

    def deliver(self, intake: Intake, event_type: str | None, obj: dict[str, Any]) -> None:
        intake.on_event(self.kind, event_type, obj)


KINDS = [
    KindCase(
        NODES,
        lambda name, version, mark: node_object(name, labels={"mark": mark}, version=str(version)),
        lambda cache, name: cache.nodes[name].labels["mark"] if name in cache.nodes else None,
    ),
    KindCase(
        PODS,
        lambda name, version, mark: bound(name, version, labels={"mark": mark}),
        lambda cache, name: (
            cache.counted[f"uid-{name}"][1].labels["mark"] if f"uid-{name}" in cache.counted else None
        ),
    ),
    KindCase(
        NAMESPACES,
        lambda name, version, mark: {
            "metadata": {"name": name, "labels": {"mark": mark}, "resourceVersion": str(version)}
        },
        lambda cache, name: cache.namespace_labels[name]["mark"] if name in cache.namespace_labels else None,
    ),
    KindCase(
        CLAIMS,
        lambda name, version, mark: claim_object(name, volume=mark, resourceVersion=str(version)),
        lambda cache, name: cache.claims[("ns", name)].volume_name if ("ns", name) in cache.claims else None,
    ),
    KindCase(
        VOLUMES,
        lambda name, version, mark: versioned(volume_object(name, **{ZONE: mark}), version),
        lambda cache, name: (
            next(iter(dict(cache.volumes[name].zones)[ZONE])) if name in cache.volumes else None
        ),
    ),
    KindCase(
        STORAGE_CLASSES,
        lambda name, version, mark: versioned(
            storage_class_object(name, "WaitForFirstConsumer" if mark == "new" else "Immediate"), version
        ),
        lambda cache, name: (
            ("new" if cache.storage_classes[name].wait_for_first_consumer else "old")
            if name in cache.storage_classes
            else None
        ),
    ),
    KindCase(
        VOLUME_ATTACHMENTS,
        lambda name, version, mark: versioned(volume_attachment_object(name, "n1", mark, "d"), version),
        lambda cache, name: cache.attachments[name].volume if name in cache.attachments else None,
    ),
    KindCase(
        CSI_NODES,
        lambda name, version, mark: versioned(csi_node_object(name, **{mark: 1}), version),
        lambda cache, name: next(iter(cache.csi_nodes[name].limits)) if name in cache.csi_nodes else None,
    ),
    KindCase(
        CSI_DRIVERS,
        lambda name, version, mark: versioned(csi_driver(name, storage_capacity=mark == "new"), version),
        lambda cache, name: (
            ("new" if cache.csi_drivers[name].storage_capacity else "old")
            if name in cache.csi_drivers
            else None
        ),
    ),
    KindCase(
        STORAGE_CAPACITIES,
        lambda name, version, mark: versioned(storage_capacity(name, ZONE, mark, capacity="1Gi"), version),
        lambda cache, name: (
            next(iter(cache.storage_capacities[("kube-system", name)].node_topology.requirements[0].values))
            if ("kube-system", name) in cache.storage_capacities
            else None
        ),
    ),
]
BY_RESOURCE = pytest.mark.parametrize("case", KINDS, ids=[case.resource for case in KINDS])


@BY_RESOURCE
async def test_older_states_arriving_late_are_ignored(setup: Setup, case: KindCase) -> None:
    case.deliver(setup.intake, "MODIFIED", case.build("a", 5, "new"))
    case.deliver(setup.intake, "MODIFIED", case.build("a", 3, "old"))
    assert case.shown(setup.cache, "a") == "new"
    case.deliver(setup.intake, "DELETED", case.build("a", 4, "old"))  # of an older incarnation
    assert case.shown(setup.cache, "a") == "new"
    case.deliver(setup.intake, "DELETED", case.build("a", 6, "new"))
    case.deliver(setup.intake, None, case.build("a", 5, "new"))  # a listing read before the delete
    assert case.shown(setup.cache, "a") is None


@BY_RESOURCE
async def test_a_relist_removes_what_was_deleted_in_a_watch_gap(setup: Setup, case: KindCase) -> None:
    setup.serve(case.resource, 10, case.build("kept", 4, "old"), case.build("gone", 5, "old"))
    await setup.intake.sync()
    case.deliver(setup.intake, "ADDED", case.build("created-later", 30, "new"))
    # The watch expires; "gone" is deleted before Kopf lists again, which replays only what exists.
    setup.serve(case.resource, 20, case.build("kept", 15, "new"))
    case.deliver(setup.intake, None, case.build("kept", 15, "new"))
    await setup.listed()
    assert case.shown(setup.cache, "gone") is None
    assert case.shown(setup.cache, "kept") == "new"
    assert case.shown(setup.cache, "created-later") == "new"  # newer than the list: it stays
    # The removal outlives a late event of the deleted object from before the list.
    case.deliver(setup.intake, "MODIFIED", case.build("gone", 6, "old"))
    assert case.shown(setup.cache, "gone") is None


@pytest.mark.parametrize("seen_before", [True, False], ids=["held", "unseen"])
async def test_a_pod_deleted_while_the_startup_list_is_read_stays_deleted(
    setup: Setup, seen_before: bool
) -> None:
    setup.serve("nodes", 10, node_object("n1", version="2"))
    old = [bound(f"p{index}", 5) for index in range(5)]
    setup.serve("pods", 10, *old)
    if seen_before:
        setup.intake.on_event(PODS, None, old[3])  # Kopf's own listing got there first

    def deleted_meanwhile(path: str, start: int) -> None:
        if path == "/api/v1/pods" and start == 0:
            setup.intake.on_event(PODS, "DELETED", bound("p3", 11))

    setup.server.during_list = deleted_meanwhile
    await setup.intake.sync()
    assert "uid-p3" not in setup.cache.counted
    assert setup.cache.usage_of("n1").pods == 4
    # One list per kind; the pods in three pages.
    assert len(setup.server.paths("GET")) == len(setup.intake.kinds) + 2


async def test_finished_pods_are_left_out_of_the_lists_as_kube_scheduler_leaves_them_out(
    setup: Setup,
) -> None:
    await setup.intake.sync()
    pod_lists = [request for request in setup.server.sent if request.path == "/api/v1/pods"]
    node_lists = [request for request in setup.server.sent if request.path == "/api/v1/nodes"]
    unfinished = "status.phase!=Succeeded,status.phase!=Failed"
    assert [r.params.get("fieldSelector") for r in pod_lists] == [unfinished]
    assert [r.params.get("fieldSelector") for r in node_lists] == [None]


async def test_a_pod_that_finishes_leaves_the_watch_and_frees_its_room(setup: Setup) -> None:
    setup.serve("nodes", 10, node_object("n1", cpu="1", version="2"))
    setup.serve("pods", 10, bound("job", 5, cpu="800m"))
    await setup.intake.sync()
    waiting = PodInfo.from_object(pod_object("waiting", cpu="500m"))
    park(setup.queue, waiting)
    finished = bound("job", 12, cpu="800m")
    finished["status"]["phase"] = "Succeeded"
    setup.intake.on_event(PODS, "DELETED", finished)  # how the filtered watch tells of it
    assert "uid-job" not in setup.cache.counted
    assert setup.cache.usage_of("n1").requested.milli_cpu == 0
    assert setup.queue.entries["uid-waiting"].where is not Where.UNSCHEDULABLE
    setup.intake.on_event(PODS, "MODIFIED", bound("job", 11, cpu="800m"))  # a late event from before: ignored
    assert "uid-job" not in setup.cache.counted


async def test_bound_pods_are_followed_from_the_first_pod_lists_version() -> None:
    watcher = ScriptedWatcher()
    setup = build(watcher=watcher)
    try:
        setup.serve("pods", 12, bound("running", 11))
        await setup.intake.start(setup.background.supervise)
        await eventually_async(lambda: watcher.versions() == ["12"], what="the watch of bound pods")
        setup.intake.on_bound_pod("DELETED", bound("running", 13))
        assert "uid-running" not in setup.cache.counted
    finally:
        setup.background.stop()


async def test_the_bound_pods_watch_restarted_after_a_failure_lists_the_pods_again() -> None:
    # An unexpected error ends the watch's run; the supervisor starts it again, and the events the
    # failed run never delivered are found by a list, not by a watch resumed past them.
    watcher = ScriptedWatcher(([], RuntimeError("a handler's bug")))
    setup = build(watcher=watcher)
    supervisor = Supervisor(sleep=_no_pause)
    try:
        setup.serve("nodes", 10, node_object("n1", version="2"))
        setup.serve("pods", 12)
        await setup.intake.start(supervisor.start)  # the watch's task is started, yet to run
        setup.serve("pods", 20, bound("missed", 15))
        await eventually_async(lambda: watcher.versions() == ["12", None], what="the watch started anew")
        await eventually_async(lambda: "uid-missed" in setup.cache.counted, what="the pods listed again")
    finally:
        await supervisor.close()
        setup.background.stop()


async def _no_pause(_seconds: float) -> None:
    """The supervisor's pause before a restart, over at once."""


async def test_a_pod_leaving_kopfs_watch_of_unbound_pods_is_counted_by_the_watch_of_bound_ones() -> None:
    setup = build(watcher=ScriptedWatcher())
    setup.serve("nodes", 10, node_object("n1", version="2"))
    setup.serve("pods", 10)
    await setup.intake.sync()
    # Bound by another scheduler: Kopf's watch says DELETED with the pod's last unbound state, before
    # or after the watch of bound pods has it at that version.
    setup.intake.on_event(PODS, "ADDED", pod_object("web", version="11"))
    assert "uid-web" in setup.intake.pending
    setup.intake.on_event(PODS, "DELETED", pod_object("web", version="13"))
    assert "uid-web" not in setup.intake.pending
    assert "uid-web" not in setup.queue.entries
    setup.intake.on_bound_pod("ADDED", bound("web", 13))
    setup.intake.on_event(PODS, "ADDED", pod_object("db", version="21"))
    setup.intake.on_bound_pod("ADDED", bound("db", 22))
    setup.intake.on_event(PODS, "DELETED", pod_object("db", version="22"))
    assert setup.cache.usage_of("n1").pods == 2
    # Assumed here, then bound: counted throughout.
    setup.intake.on_event(PODS, "ADDED", pod_object("api", version="31"))
    setup.cache.assume(setup.intake.pending["uid-api"], "n1")
    setup.intake.on_event(PODS, "DELETED", pod_object("api", version="32"))
    assert setup.cache.usage_of("n1").pods == 3
    setup.intake.on_event(PODS, "MODIFIED", pod_object("api", version="31"))  # a late older state: refused
    assert "uid-api" not in setup.intake.pending
    setup.intake.on_bound_pod("ADDED", bound("api", 32))
    assert "uid-api" not in setup.cache.assumed
    # Deleted while waiting: gone, and a list does not find it missing (no drift).
    setup.intake.on_event(PODS, "ADDED", pod_object("gone", version="41"))
    setup.intake.on_event(PODS, "DELETED", pod_object("gone", version="42"))
    assert "uid-gone" not in setup.intake.pending
    assert "uid-gone" not in setup.intake.versions["pods"].held
    # Without a watch of bound pods, Kopf's DELETED is the pod's deletion.
    plain = build()
    plain.intake.on_event(NODES, "ADDED", node_object("n1", version="2"))
    plain.intake.on_event(PODS, "ADDED", bound("web", 13))
    plain.intake.on_event(PODS, "DELETED", bound("web", 14))
    assert "uid-web" not in plain.cache.counted


async def test_a_pod_bound_here_whose_binding_the_watch_lost_is_dropped_by_the_relist_that_lacks_it() -> None:
    # The watch of bound pods gets 410 Gone before it delivers the binding; the pod ends before the
    # watch starts anew, so no event ever tells of it. Only the list the 410 asks for can.
    gone = ApiError(Request("GET", "/api/v1/pods"), 410, "Expired", "too old resource version: 12")
    watcher = ScriptedWatcher(([], gone))
    setup = build(watcher=watcher)
    try:
        setup.serve("nodes", 10, node_object("n1", cpu="1", version="2"))
        setup.serve("pods", 10)
        await setup.intake.sync()
        setup.intake.on_event(
            PODS, "ADDED", pod_object("web", cpu="800m", labels={"app": "web"}, version="11")
        )
        setup.cache.assume(setup.intake.pending["uid-web"], "n1")
        setup.intake.on_event(
            PODS, "DELETED", pod_object("web", cpu="800m", labels={"app": "web"}, version="12")
        )
        park(setup.queue, PodInfo.from_object(pod_object("waiting", cpu="500m")))
        setup.serve("pods", 20)  # deleted, or finished (the lists leave finished pods out)
        assert setup.intake.bound_pods is not None
        await follow_until(setup.intake.bound_pods.follow("12"), watcher, 2)
        await setup.listed()
        assert "uid-web" not in setup.cache.counted
        assert setup.cache.usage_of("n1").requested.milli_cpu == 0
        selector = parse_label_selector({"matchLabels": {"app": "web"}}, "selector")
        assert list(setup.cache.pods_selected_by(selector)) == []
        assert setup.queue.entries["uid-waiting"].where is not Where.UNSCHEDULABLE
        # A late event of the pod from before the list is refused.
        setup.intake.on_bound_pod("ADDED", bound("web", 12, cpu="800m"))
        assert "uid-web" not in setup.cache.counted
    finally:
        setup.background.stop()


async def test_a_relist_keeps_a_pod_bound_here_that_it_shows_or_that_is_newer_than_the_list() -> None:
    setup = build(watcher=ScriptedWatcher())
    try:
        setup.serve("nodes", 10, node_object("n1", cpu="2", version="2"))
        setup.serve("pods", 10)
        await setup.intake.sync()
        for name, version in (("listed", 11), ("newer", 31)):
            setup.intake.on_event(PODS, "ADDED", pod_object(name, version=str(version)))
            setup.cache.assume(setup.intake.pending[f"uid-{name}"], "n1")
            setup.intake.on_event(PODS, "DELETED", pod_object(name, version=str(version + 1)))
        # Read before "newer" was created; "listed" shows bound, its binding's event not yet in.
        setup.serve("pods", 25, bound("listed", 12))
        setup.intake.relist(setup.intake.kinds["pods"])
        await setup.listed()
        assert set(setup.cache.counted) == {"uid-listed", "uid-newer"}
        assert "uid-listed" not in setup.cache.assumed  # the list showed its binding
    finally:
        setup.background.stop()


async def test_a_parked_pod_is_retried_when_a_relist_drops_the_pod_holding_its_room(setup: Setup) -> None:
    setup.serve("nodes", 10, node_object("n1", cpu="1", version="2"))
    setup.serve("pods", 10, bound("holder", 5, cpu="800m"), bound("other", 6))
    await setup.intake.sync()
    waiting = PodInfo.from_object(pod_object("waiting", cpu="500m"))
    park(setup.queue, waiting)
    setup.serve("pods", 20, bound("other", 6))
    setup.intake.on_event(PODS, None, bound("other", 6))
    await setup.listed()
    assert setup.cache.usage_of("n1").requested.milli_cpu == 100
    assert setup.queue.entries["uid-waiting"].where is not Where.UNSCHEDULABLE


async def test_a_pending_pod_dropped_by_a_relist_leaves_the_queue(setup: Setup) -> None:
    setup.serve("pods", 10, pod_object("queued", version="5"))
    await setup.intake.sync()
    assert "uid-queued" in setup.queue.entries
    setup.serve("pods", 20)
    setup.intake.on_event(PODS, None, bound("someone-else", 19))
    await setup.listed()
    assert "uid-queued" not in setup.intake.pending
    assert "uid-queued" not in setup.queue.entries


async def test_relists_of_a_kind_are_folded_while_one_runs(setup: Setup) -> None:
    await setup.intake.sync()
    gate = asyncio.Event()
    requests: list[int] = []

    async def held(request: Request) -> Any:
        requests.append(1)
        await gate.wait()
        return ListServer.answer(setup.server, request)

    setup.server.send = held  # type: ignore[method-assign]
    setup.intake.on_event(NODES, None, node_object("n0", version="2"))
    await eventually_async(lambda: len(requests) == 1, what="the first relist under way")
    for index in range(1, 5):
        setup.intake.on_event(NODES, None, node_object(f"n{index}", version="2"))
    gate.set()
    await setup.listed()
    assert len(requests) == 2  # the one running, and one more for the requests made meanwhile


async def test_drift_is_counted_by_kind_once_no_watch_event_explains_it(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.serve("nodes", 10, node_object("n1", version="2"), node_object("n2", version="3"))
    setup.serve("pods", 10, bound("lost", 4), bound("kept", 5))
    await setup.intake.start(setup.background.supervise)
    before = {kind: drift(kind) for kind in ("nodes", "pods")}
    # The watch has missed n2's deletion and a new pod; the deletion of "lost" is merely in flight.
    setup.serve("nodes", 40, node_object("n1", version="2"))
    setup.serve("pods", 40, bound("kept", 5), bound("unseen", 33))
    await setup.sleeping(RESYNC)
    setup.sleeps.end(RESYNC)
    await setup.listed()
    assert "n2" not in setup.cache.nodes  # repaired at once
    assert "uid-unseen" in setup.cache.counted
    setup.intake.on_event(PODS, "DELETED", bound("lost", 30))  # the deletion the list found, now arriving
    with caplog.at_level(logging.WARNING, logger="promsched.scheduling.intake.following"):
        setup.sleeps.end(GRACE)
        await setup.listed()
    assert drift("nodes") - before["nodes"] == 1
    assert drift("pods") - before["pods"] == 1  # "unseen"; the watch was only late with "lost"
    warnings = [record.getMessage() for record in caplog.records]
    assert any("nodes n2 was deleted" in line for line in warnings)
    assert any("pods ns/unseen was missing" in line for line in warnings)
    assert setup.sleeps.count(RESYNC) == 1  # the next safety net is due
    assert setup.sleeps.count(GRACE) == 0


async def test_no_drift_is_counted_when_a_pending_pods_deletion_races_a_relist() -> None:
    setup = build(watcher=ScriptedWatcher())
    try:
        setup.serve("pods", 10, pod_object("queued", version="5"))
        await setup.intake.sync()
        before = drift("pods")
        setup.serve("pods", 20)  # read after the deletion, whose event is still on its way
        setup.intake.relist(setup.intake.kinds["pods"])
        await setup.listed()
        assert "uid-queued" not in setup.intake.pending
        setup.intake.on_event(
            PODS, "DELETED", pod_object("queued", version="18")
        )  # Kopf's watch of unbound pods
        await setup.sleeping(GRACE)
        setup.sleeps.end(GRACE)
        await setup.listed()
        assert drift("pods") == before
    finally:
        setup.background.stop()


async def test_no_drift_is_counted_when_a_binding_arrives_while_a_relist_reads_its_later_pages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Pod "web" is bound just before a relist reads it on the first page; the binding's event on the
    # watch of bound pods arrives while the later pages are read, and no event of it comes after.
    setup = build(watcher=ScriptedWatcher())
    try:
        setup.serve("nodes", 10, node_object("n1", cpu="2", version="2"))
        setup.serve("pods", 10, bound("a", 5), bound("b", 6))
        await setup.intake.sync()
        before = drift("pods")
        setup.intake.on_event(PODS, "ADDED", pod_object("web", version="11"))
        setup.intake.on_event(PODS, "DELETED", pod_object("web", version="12"))  # bound: left Kopf's watch
        setup.serve("pods", 20, bound("web", 12), bound("a", 5), bound("b", 6))
        delivered: list[int] = []

        def binding_in_flight(path: str, start: int) -> None:
            if path == "/api/v1/pods" and start > 0:  # the second page asked for
                setup.intake.on_bound_pod("ADDED", bound("web", 12))
                delivered.append(start)

        setup.server.during_list = binding_in_flight
        setup.intake.relist(setup.intake.kinds["pods"])
        await setup.listed()
        assert delivered == [2]
        with caplog.at_level(logging.WARNING, logger="promsched.scheduling.intake.following"):
            await setup.sleeping(GRACE)  # the wait of the difference the first page found
            setup.sleeps.end(GRACE)
            await setup.listed()
        assert drift("pods") == before
        assert not [record for record in caplog.records if "drifted" in record.getMessage()]
    finally:
        setup.background.stop()


async def test_no_drift_is_counted_when_the_lists_agree(setup: Setup) -> None:
    setup.serve("nodes", 10, node_object("n1", version="2"))
    await setup.intake.start(setup.background.supervise)
    before = drift("nodes")
    await setup.sleeping(RESYNC)
    setup.sleeps.end(RESYNC)
    await setup.listed()
    assert setup.sleeps.count(GRACE) == 0
    assert drift("nodes") == before


async def test_a_list_that_fails_is_retried(setup: Setup) -> None:
    setup.server.fail["/api/v1/namespaces"] = 500
    syncing = asyncio.create_task(setup.intake.sync())
    await setup.sleeping(1.0)
    assert not setup.intake.synced.is_set()
    del setup.server.fail["/api/v1/namespaces"]
    setup.sleeps.end(1.0)
    await syncing
    assert setup.intake.synced.is_set()


async def test_an_assumed_pod_seen_finished_gives_parked_pods_its_room(setup: Setup) -> None:
    setup.intake.on_event(NODES, "ADDED", node_object("n1", cpu="1", version="2"))
    job = PodInfo.from_object(pod_object("job", cpu="800m"))
    setup.cache.assume(job, "n1")
    park(setup.queue, PodInfo.from_object(pod_object("waiting", cpu="500m")))
    finished = bound("job", 9, cpu="800m")
    finished["status"]["phase"] = "Succeeded"
    setup.intake.on_event(PODS, "MODIFIED", finished)
    assert setup.cache.usage_of("n1").pods == 0
    assert setup.queue.entries["uid-waiting"].where is not Where.UNSCHEDULABLE


async def test_a_kind_is_listed_once_kopfs_listing_has_stopped_coming() -> None:
    clock = Clock(100.0)
    setup = build(relist_quiet=1.0, clock=clock)
    try:
        await setup.intake.sync()
        setup.intake.on_event(NODES, None, node_object("n0", version="2"))
        await setup.sleeping(1.0)
        clock.advance(0.5)
        setup.intake.on_event(NODES, None, node_object("n1", version="3"))
        setup.sleeps.end(1.0)
        await setup.sleeping(1.0)  # another second since the last object of Kopf's listing
        clock.advance(1.0)
        setup.sleeps.end(1.0)
        await setup.listed()
        assert setup.server.paths("GET").count("/api/v1/nodes") == 2  # the first list and one more
    finally:
        setup.background.stop()
