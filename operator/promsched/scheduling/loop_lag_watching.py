"""How late the event loop runs what is ready: a task asks to wake every `LAG_PROBE_SECONDS` and records
how much later than asked it woke (`promsched_event_loop_lag_seconds`). Everything the operator does
shares this one loop, Kopf's watches and the scheduling cycles alike, so work that holds it (parsing a
large answer, a burst of events) delays every pod behind it by as much; the histogram shows the stalls
that put pods into the latency's tail."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final

from promsched.scheduling import telemetry

# Often enough to catch stalls of a few tens of milliseconds without costing the loop anything measurable.
LAG_PROBE_SECONDS: Final = 0.1


async def watch_loop_lag(
    *,
    interval: float = LAG_PROBE_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    observe: Callable[[float], None] = telemetry.event_loop_lag.observe,
) -> None:
    """Record the loop's lag every `interval` (into the histogram, or to `observe`), until cancelled."""
    while True:
        asked = clock()
        await sleep(interval)
        observe(max(0.0, clock() - asked - interval))
