"""The intake over a fake API server: lists answered page by page, sleeps that last until the test ends
them, background work the test can wait for; and what the tests read of it."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY

from promsched.kube.requests import Request
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.intake.following import Intake
from promsched.scheduling.queues import SchedulingQueue
from support.background import Background
from support.fake_apis import FakeSender
from support.objects import pod_object
from support.polling import eventually_async

RESYNC = 300.0
GRACE = 5.0


class ListServer(FakeSender):
    """Answers each kind's list from `lists` (path -> (resourceVersion, items)), `page_size` items a
    page; `during_list(path, first item)` runs as a page's request arrives, as a watch event would be
    handled while the page is on its way."""

    def __init__(self, page_size: int = 100) -> None:
        super().__init__()
        self.lists: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self.page_size = page_size
        self.during_list: Callable[[str, int], None] | None = None

    def answer(self, request: Request) -> Any:
        if request.method != "GET" or request.path not in self.lists:
            return super().answer(request)
        version, items = self.lists[request.path]
        start = int(request.params.get("continue") or 0)
        if self.during_list is not None:
            self.during_list(request.path, start)
        metadata = {"resourceVersion": str(version)}
        if start + self.page_size < len(items):
            metadata["continue"] = str(start + self.page_size)
        return {"metadata": metadata, "items": copy.deepcopy(items[start : start + self.page_size])}


class Sleeps:
    """Stands in for asyncio.sleep: each sleep lasts until the test ends it."""

    def __init__(self) -> None:
        self.waiting: list[tuple[float, asyncio.Future[None]]] = []

    async def __call__(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((seconds, future))
        await future

    def count(self, seconds: float | None = None) -> int:
        """Sleeps of `seconds` (None: of any length) not yet ended."""
        return sum(1 for length, future in self.waiting if seconds in (None, length) and not future.done())

    def end(self, seconds: float) -> None:
        for length, future in self.waiting:
            if length == seconds and not future.done():
                future.set_result(None)


class SupervisedBackground(Background):
    """The intake's `spawn` and `supervise`: tasks the test can wait for."""

    def supervise(self, _name: str, work: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """The intake's `supervise`, without restarts: runs `work` once."""
        return self(work())


@dataclass
class Setup:
    """An intake and what stands in for its API server, its sleeps and its background work."""

    intake: Intake
    server: ListServer
    sleeps: Sleeps
    background: SupervisedBackground
    refused: list[str]

    @property
    def cache(self) -> ClusterCache:
        return self.intake.cache

    @property
    def queue(self) -> SchedulingQueue:
        return self.intake.queue

    def serve(self, resource: str, version: int, *items: dict[str, Any]) -> None:
        self.server.lists[self.intake.kinds[resource].path] = (version, list(items))

    async def listed(self) -> None:
        """Wait until the intake's background work is done or waits in a sleep (no list runs)."""

        def quiet() -> bool:
            return len([task for task in self.background.tasks if not task.done()]) == self.sleeps.count()

        await eventually_async(quiet, what="the lists done")

    async def sleeping(self, seconds: float) -> None:
        await eventually_async(lambda: self.sleeps.count(seconds) == 1, what=f"a sleep of {seconds}s")


def build(**options: Any) -> Setup:
    """An intake (`options`: more of its arguments) whose lists are read two objects a page, every kind
    served empty at version 1 until a test serves more, and that relists at once when asked."""
    server = ListServer(page_size=2)
    sleeps, background, refused = Sleeps(), SupervisedBackground(), []
    queue = SchedulingQueue()
    intake = Intake(
        server,
        ClusterCache(),
        queue,
        schedules=lambda _pod: True,  # every pending pod is queued
        refuse=lambda _obj, message: refused.append(message),
        spawn=background,
        resync_interval=RESYNC,
        drift_grace=GRACE,
        sleep=sleeps,
        **{"relist_quiet": 0.0, **options},
    )
    ready = Setup(intake, server, sleeps, background, refused)
    for resource in intake.kinds:
        ready.serve(resource, 1)
    return ready


def bound(name: str, version: int, cpu: str = "100m", node: str = "n1", **options: Any) -> dict[str, Any]:
    """A pod on `node` at `version`."""
    return pod_object(name, node_name=node, cpu=cpu, version=str(version), **options)


def drift(kind: str) -> float:
    """The drift counted of `kind` so far, in this process."""
    return REGISTRY.get_sample_value("promsched_cache_drift_total", {"kind": kind}) or 0.0
