"""The client-side rate limit kube-scheduler's client has (`--kube-api-qps`, `--kube-api-burst`).

client-go's token bucket (golang.org/x/time/rate, as `rest.Config`'s QPS and Burst build it): `burst`
tokens at first, refilled at `qps` a second up to `burst`; each request takes one, or waits for one.
One difference: requests that wait are served by priority, then in arrival order, so a binding goes out
before the events and status writes that queued ahead of it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Awaitable, Callable

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

# A token counts as whole within this much, so float arithmetic never leaves a waiter a sliver short
# (and a fake clock never has to move by less than it can represent).
_SLACK = 1e-9


class TokenBucket:
    """Tokens for requests: `take` returns at once while the bucket holds one and nobody waits;
    otherwise a dispenser task hands out tokens as they refill, lowest priority number first."""

    def __init__(
        self, qps: float, burst: int, *, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep
    ) -> None:
        if not (qps > 0 and math.isfinite(qps)) or burst < 1:
            raise ValueError(f"a token bucket needs qps > 0 and burst >= 1, not qps={qps}, burst={burst}")
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self.sleep = sleep
        self._tokens = float(burst)
        self._stamp = clock()
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()
        self._dispenser: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """Requests waiting for a token now."""
        return sum(not future.done() for _priority, _arrival, future in self._waiting)

    async def take(self, priority: int = 0) -> None:
        self._refill()
        if not self._waiting and self._tokens + _SLACK >= 1:
            self._tokens -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (priority, next(self._arrivals), future))
        if self._dispenser is None or self._dispenser.done():
            self._dispenser = asyncio.create_task(self._dispense(), name="promsched-api-rate-limit")
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                # Handed a token, then cancelled before using it: it goes back.
                self._tokens = min(float(self.burst), self._tokens + 1)
            raise

    async def close(self) -> None:
        """Stop the dispenser; whoever still waits gets `RuntimeError`."""
        if self._dispenser is not None:
            self._dispenser.cancel()
            await asyncio.wait([self._dispenser])
            self._dispenser = None
        for _priority, _arrival, future in self._waiting:
            if not future.done():
                future.set_exception(RuntimeError("the API client was closed while this request waited"))
        self._waiting.clear()

    async def _dispense(self) -> None:
        while True:
            self._refill()
            while self._waiting and (self._waiting[0][2].done() or self._tokens + _SLACK >= 1):
                _priority, _arrival, future = heapq.heappop(self._waiting)
                if not future.done():  # a cancelled waiter just leaves its place
                    future.set_result(None)
                    self._tokens -= 1
            if not self._waiting:
                return
            await self.sleep((1 - self._tokens) / self.qps)

    def _refill(self) -> None:
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now
