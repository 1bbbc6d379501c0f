"""The writes that inform (events, pod conditions) go through one bounded queue, behind bindings.

Bindings are sent at once by the binder; everything else waits here, sent by a few workers. A write
for an object that already has one pending replaces it (a newer condition or series count makes the
older one moot), and when the queue is full a new write is dropped and counted
(`promsched_api_writes_dropped_total{kind}`), so under pressure the API server sees bindings first
and a bounded trickle of the rest, never an unbounded pile of background tasks. Writes for one object
go out in order: while one is being sent, the next waits for it (a series patch must not overtake
its Event's create, nor an older condition a newer one).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp

from promsched.kube.requests import Request
from promsched.kube.sending import ApiError
from promsched.scheduling import telemetry

logger = logging.getLogger(__name__)

# Room for a FailedScheduling event and a PodScheduled condition for each of 2500 pods at once: a burst
# of pods that fit nowhere is told why, not dropped (about 2 KB a write).
QUEUE_LIMIT: Final = 5000
WORKERS: Final = 4

Send = Callable[[Request], Awaitable[Any]]


class WriteQueue:
    """Writes waiting to be sent by at most `workers` tasks, started by `spawn` when there is work and
    ending when there is none, so an idle scheduler holds no writer tasks."""

    def __init__(
        self,
        send: Send,
        spawn: Callable[[Awaitable[None]], asyncio.Task[None]],
        *,
        limit: int = QUEUE_LIMIT,
        workers: int = WORKERS,
    ) -> None:
        self.send = send
        self.spawn = spawn
        self.limit = limit
        self.workers = workers
        self.active = 0
        self._pending: OrderedDict[tuple[str, str], Request] = OrderedDict()
        self._sending: set[tuple[str, str]] = set()  # slots whose write is on its way
        self._idle = asyncio.Event()
        self._idle.set()
        self.dropped: dict[str, int] = {}
        self.coalesced = 0

    def __len__(self) -> int:
        return len(self._pending)

    def pending(self, kind: str, key: str) -> Request | None:
        """The write of `kind` for `key` that waits to be sent, if any (not one on its way)."""
        return self._pending.get((kind, key))

    def submit(self, kind: str, key: str, request: Request) -> bool:
        """Queue `request`, the write of `kind` for the object `key`; False when dropped (full)."""
        slot = (kind, key)
        if slot in self._pending:
            self._pending[slot] = request  # keeps its place: the newest state goes out when it is due
            self.coalesced += 1
            return True
        if len(self._pending) >= self.limit:
            self.dropped[kind] = self.dropped.get(kind, 0) + 1
            telemetry.api_writes_dropped.labels(kind).inc()
            return False
        self._pending[slot] = request
        if self.active < self.workers:
            self.active += 1
            self._idle.clear()
            self.spawn(self._work())
        return True

    async def drain(self) -> None:
        """Wait until every queued write has been sent (or has failed)."""
        await self._idle.wait()

    def _next(self) -> tuple[tuple[str, str], Request] | None:
        """The oldest write whose object has none on its way (at most `workers` are passed over)."""
        for slot, request in self._pending.items():
            if slot not in self._sending:
                del self._pending[slot]
                return slot, request
        return None

    async def _work(self) -> None:
        """Send queued writes until none is left that may go now; a write held back behind its object's
        is sent by the worker sending that one, when it is done. A failed write is logged, not retried
        (an event or a condition is information, and a newer one follows)."""
        try:
            while (taken := self._next()) is not None:
                slot, request = taken
                self._sending.add(slot)
                try:
                    await self.send(request)
                except (ApiError, aiohttp.ClientError, TimeoutError) as error:
                    logger.warning("%s %s failed: %s", request.method, request.path, error)
                finally:
                    self._sending.discard(slot)
        finally:
            self.active -= 1
            if not self.active:
                self._idle.set()
