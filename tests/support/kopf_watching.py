"""Watch events through Kopf's real path without a cluster: its watcher, per-object workers and handler
machinery, with the settings and handlers promsched's startup installs, over a fake API.

Kopf's list call and watch stream are patched (`fake_api`): the list is empty, the stream yields the
given parsed events, each once the previous one reached the scheduler, as events trickle in from the API
server. Each pod's worker ends after `wiring.KOPF_WORKER_IDLE_SECONDS` without events, or when the
watcher does. The JSON parsing of the stream's lines and aiohttp's reads are not in it.

It imports only Kopf and promsched, so `bench.kopf_micro` imports it too, as `tests.support.kopf_watching`
(run from the repository root).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any
from unittest import mock

import kopf
from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.clients import api, fetching
from kopf._cogs.structs import ephemera, references
from kopf._core.actions import lifecycles
from kopf._core.engines import indexing
from kopf._core.intents import registries
from kopf._core.reactor import inventory, processing, queueing

from promsched.operating import wiring
from promsched.scheduling.intake.following import Intake
from promsched.scheduling.intake.kinds import Kind
from promsched.scheduling.schedulers import Scheduler

PODS = references.Resource(
    group="",
    version="v1",
    plural="pods",
    kind="Pod",
    singular="pod",
    namespaced=True,
    verbs=frozenset({"list", "watch", "patch"}),
)


class Handled:
    """Counts the events that reached the intake and wakes the fake stream on each."""

    def __init__(self, intake: Intake) -> None:
        self.on_event = intake.on_event
        self.count = 0
        self.waiters: list[asyncio.Future[None]] = []

    def __call__(self, kind: Kind, event_type: str | None, obj: Any) -> None:
        self.on_event(kind, event_type, obj)
        self.count += 1
        for waiter in self.waiters:
            waiter.set_result(None)
        self.waiters.clear()

    async def reached(self, count: int) -> None:
        while self.count < count:
            waiter = asyncio.get_running_loop().create_future()
            self.waiters.append(waiter)
            await waiter


@contextlib.contextmanager
def fake_api(events: list[dict[str, Any]], handled: Handled) -> Iterator[None]:
    """Kopf's list of pods is empty; its watch stream yields `events`, one once the last was handled,
    then stays open."""

    async def fetch_objs(**_: Any) -> AsyncIterator[tuple[list[Any], str]]:
        yield [], "1"

    async def stream(**_: Any) -> AsyncIterator[Any]:
        for count, event in enumerate(events):
            yield event
            await handled.reached(count + 1)
        await asyncio.Event().wait()
        yield  # an async generator

    with (
        mock.patch.object(fetching, "fetch_objs", fetch_objs),
        mock.patch.object(api, "stream", stream),
    ):
        yield


async def watch(
    scheduler: Scheduler,
    events: list[dict[str, Any]],
    *,
    idle_timeout: float | None = None,
    then: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """`events` through Kopf's watcher of pods, as kopf.run's orchestration starts it, to promsched's
    registered handlers and on to `scheduler.intake.on_event`; returns once every event reached it, and `then`
    (awaited while the watcher and its workers still run). `idle_timeout` replaces promsched's
    `settings.queueing.idle_timeout`."""
    settings = kopf.OperatorSettings()
    wiring.configure(settings, wiring.RunOptions())
    if idle_timeout is not None:
        settings.queueing.idle_timeout = idle_timeout
    handled = Handled(scheduler.intake)
    scheduler.intake.on_event = handled  # type: ignore[method-assign]
    runtime: Any = mock.Mock(scheduler=scheduler)  # what the handlers read of it
    operator_paused = aiotoggles.ToggleSet(any)
    processor = functools.partial(
        processing.process_resource_event,
        lifecycle=lifecycles.get_default_lifecycle(),
        registry=registries.get_default_registry(),  # promsched's handlers, as wiring registers them
        settings=settings,
        indexers=indexing.OperatorIndexers(),
        memories=inventory.ResourceMemories(),
        memobase=ephemera.AnyMemo(wiring.Memo(runtime=runtime)),
        operator_paused=operator_paused,
        event_queue=asyncio.Queue(),
    )
    with fake_api(events, handled):
        watcher = asyncio.create_task(
            queueing.watcher(
                namespace=None,
                settings=settings,
                resource=PODS,
                processor=functools.partial(processor, resource=PODS),
                operator_paused=operator_paused,
            )
        )
        await handled.reached(len(events))
        if then is not None:
            await then()
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
