"""The Kopf wiring's own parts that run without a cluster."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import copy
import gc
import socket
import ssl
import sys
from typing import Any, cast
from unittest import mock

import aiohttp
import kopf
import pytest

from promsched.kube.credentials import Credentials, FixedToken
from promsched.kube.sending import KubeClient
from promsched.operating import listening
from promsched.operating.wiring import (
    FULL_COLLECTION_EVERY,
    GIL_SWITCH_SECONDS,
    HANDLERS,
    KOPF_WORKER_IDLE_SECONDS,
    TLS_READ_BUFFER,
    WARM_CONNECTIONS,
    Memo,
    NoDiffBase,
    NoProgress,
    RunOptions,
    Runtime,
    configure,
    freeze_when_synced,
    limit_tls_read_buffers,
    login,
    startup,
    warm_when_synced,
)
from promsched.scheduling.intake.kinds import NODES, PODS, WATCHED, Kind
from promsched.scheduling.schedulers import Scheduler
from support.fake_apis import FakeSender
from support.kopf_watching import watch
from support.objects import node_object, pod_object


def test_no_diff_base_keeps_no_state_of_pods() -> None:
    storage = NoDiffBase()
    body = kopf.Body({"metadata": {"name": "web", "uid": "u"}, "spec": {"containers": [{"name": "c"}]}})
    assert storage.fetch(body=body) is None
    essence = storage.build(body=body)
    assert essence == {}
    essence["spec"] = {}  # what Kopf may do with one essence leaves the next one alone
    assert storage.build(body=body) == {}


def test_no_progress_is_kept_or_written() -> None:
    storage = NoProgress()
    body = kopf.Body({"metadata": {"name": "web", "uid": "u"}})
    patch = kopf.Patch()
    storage.store(key=kopf.HandlerId("h"), record=kopf.ProgressRecord(retries=1), body=body, patch=patch)
    storage.touch(body=body, patch=patch, value="x")
    assert storage.fetch(key=kopf.HandlerId("h"), body=body) is None
    assert not patch
    essence = NoDiffBase().build(body=body)
    assert storage.clear(essence=essence) is essence


async def test_startup_keeps_no_diff_base_or_progress_and_shortens_gil_switches() -> None:
    settings = kopf.OperatorSettings()
    listener = listening.bind("127.0.0.1:0")
    listener.close()  # the startup stops at its last step, after the settings
    switch_interval = sys.getswitchinterval()
    try:
        with pytest.raises(kopf.PermanentError):
            await startup(settings=settings, memo=Memo(runtime=runtime_on(listener)))
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_SECONDS)
    finally:
        sys.setswitchinterval(switch_interval)
    assert switch_interval > GIL_SWITCH_SECONDS  # Python's own, which the startup changed
    assert isinstance(settings.persistence.diffbase_storage, NoDiffBase)
    assert isinstance(settings.persistence.progress_storage, NoProgress)


def test_kopf_watches_and_lists_only_unbound_unfinished_pods() -> None:
    settings = kopf.OperatorSettings()
    configure(settings, RunOptions())
    pods = kopf.Resource("", "v1", "pods", kind="Pod", namespaced=True)
    nodes = kopf.Resource("", "v1", "nodes", kind="Node", namespaced=False)
    selectors = settings.watching.field_selectors
    unbound = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
    assert list(selectors.collect(pods)) == [unbound]
    assert not list(selectors.collect(nodes))


def test_kopf_ends_an_idle_objects_worker_sooner_than_its_default() -> None:
    settings = kopf.OperatorSettings()
    kopfs_own = settings.queueing.idle_timeout
    configure(settings, RunOptions())
    assert settings.queueing.idle_timeout == KOPF_WORKER_IDLE_SECONDS < kopfs_own


async def test_tls_connections_get_small_read_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", 256 * 1024)  # restored afterwards
    limit_tls_read_buffers()
    loop = asyncio.get_running_loop()
    protocol = asyncio.sslproto.SSLProtocol(
        loop, asyncio.Protocol(), ssl.create_default_context(), loop.create_future(), server_hostname="x"
    )
    assert len(protocol._ssl_buffer) == TLS_READ_BUFFER


# ----- the runtime in Kopf's memo ------------------------------------------------------------------------


def runtime_on(listener: socket.socket) -> Runtime:
    credentials = Credentials("http://127.0.0.1:1", "a test", token=FixedToken("t", "a token"))
    return Runtime(RunOptions(), credentials, KubeClient(credentials), Scheduler(FakeSender()), listener)


async def test_handlers_find_the_runtime_in_kopfs_memo() -> None:
    memo = Memo(runtime=runtime_on(listening.bind("127.0.0.1:0")))
    per_object = copy.copy(memo)  # what Kopf hands the handlers of each watched object
    try:
        await HANDLERS[NODES](event={"type": "ADDED", "object": node_object("n1")}, memo=per_object)
        assert set(memo.runtime.scheduler.cache.nodes) == {"n1"}
        session = await login(memo=per_object)
        assert session.server == "http://127.0.0.1:1"
        await session.aiohttp_session.close()
    finally:
        memo.runtime.listener.close()


async def test_a_startup_that_fails_stops_what_it_started_and_is_not_retried() -> None:
    listener = listening.bind("127.0.0.1:0")
    listener.close()  # aiohttp cannot serve on it: the last startup step fails
    memo = Memo(runtime=runtime_on(listener))
    with pytest.raises(kopf.PermanentError) as raised:
        await startup(settings=kopf.OperatorSettings(), memo=memo)
    runtime = memo.runtime
    assert str(raised.value) == runtime.failure == "startup failed: [Errno 9] Bad file descriptor"
    assert runtime.loop_task is not None
    assert runtime.loop_task.cancelled(), "the scheduling loop it had started is stopped"
    assert runtime.freeze_task is not None
    assert runtime.freeze_task.cancelled()
    assert runtime.warm_task is not None
    assert runtime.warm_task.cancelled()


class WarmedClient:
    def __init__(self, error: Exception | None = None) -> None:
        self.warmed: list[int] = []
        self.error = error

    async def warm(self, connections: int) -> None:
        self.warmed.append(connections)
        if self.error is not None:
            raise self.error


@pytest.mark.parametrize("error", [None, aiohttp.ClientConnectionError("refused"), TimeoutError()])
async def test_connections_are_warmed_once_the_initial_lists_are_in(error: Exception | None) -> None:
    synced, client = asyncio.Event(), WarmedClient(error)
    warming = asyncio.create_task(warm_when_synced(synced, cast(KubeClient, client)))
    await asyncio.sleep(0)  # the task runs up to its wait
    assert client.warmed == []
    synced.set()
    await warming  # a failure leaves the connections to be opened as needed
    assert client.warmed == [WARM_CONNECTIONS]


async def test_the_heap_is_frozen_once_the_initial_lists_are_in() -> None:
    synced = asyncio.Event()
    thresholds = gc.get_threshold()
    freezing = asyncio.create_task(freeze_when_synced(synced))
    try:
        await asyncio.sleep(0)  # the task runs up to its wait
        assert not freezing.done()
        assert gc.get_freeze_count() == 0
        assert gc.get_threshold()[2] != FULL_COLLECTION_EVERY
        synced.set()
        await freezing
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (*thresholds[:2], FULL_COLLECTION_EVERY)
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


# ----- Kopf's path of watch events -------------------------------------------------------------------------


class RecordingIntake:
    def __init__(self) -> None:
        self.kinds: list[Kind] = []
        self.pod_events: list[tuple[str | None, str, str]] = []

    def on_event(self, kind: Kind, event_type: str | None, obj: dict[str, Any]) -> None:
        self.kinds.append(kind)
        metadata = obj["metadata"]
        self.pod_events.append((event_type, metadata["name"], metadata["resourceVersion"]))


class RecordingScheduler:
    def __init__(self) -> None:
        self.intake = RecordingIntake()


def test_kopf_follows_every_kind_of_the_intakes_table_and_the_policies() -> None:
    followed = {
        (handler.selector.group, handler.selector.version, handler.selector.any_name): handler.id
        for handler in kopf.get_default_registry()._watching.get_all_handlers()
        if handler.selector is not None
    }
    assert followed == {
        **{(kind.group, kind.version, kind.plural): f"{kind.plural}_event" for kind in WATCHED},
        ("promsched.io", "v1alpha1", "schedulingpolicies"): "policy_event",
    }


async def test_each_kinds_handler_hands_its_events_to_the_intake_as_that_kind() -> None:
    scheduler = RecordingScheduler()
    memo = Memo(runtime=cast(Runtime, mock.Mock(scheduler=scheduler)))
    for kind in WATCHED:
        obj = {"metadata": {"name": kind.plural, "resourceVersion": "1"}}
        await HANDLERS[kind](event={"type": None, "object": obj}, memo=memo)
    assert scheduler.intake.kinds == list(WATCHED)
    assert scheduler.intake.pod_events == [(None, kind.plural, "1") for kind in WATCHED]


async def test_every_pod_event_reaches_the_scheduler_through_kopf_in_order() -> None:
    events = [
        {"type": "ADDED", "object": pod_object("a")},
        {"type": "ADDED", "object": pod_object("b")},
        {"type": "MODIFIED", "object": pod_object("a", version="2", nodeName="n1")},
        {"type": "MODIFIED", "object": pod_object("a", version="3", node_name="n1")},
        {"type": "MODIFIED", "object": pod_object("b", version="2", nodeName="n1")},
        {"type": "DELETED", "object": pod_object("a", version="4", node_name="n1")},
    ]
    scheduler = RecordingScheduler()
    async with asyncio.timeout(30):  # a deadline, not a measure: an event lost would hang the stream
        # Kopf's watcher, per-object workers and handlers, with promsched's settings and handlers.
        await watch(cast(Scheduler, scheduler), events)
    assert set(scheduler.intake.kinds) == {PODS}
    assert scheduler.intake.pod_events == [
        ("ADDED", "a", "1"),
        ("ADDED", "b", "1"),
        ("MODIFIED", "a", "2"),
        ("MODIFIED", "a", "3"),
        ("MODIFIED", "b", "2"),
        ("DELETED", "a", "4"),
    ]
