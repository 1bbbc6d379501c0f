"""How late the event loop runs what is ready: a task asks to wake every `LAG_PROBE_SECONDS` and records
how much later than asked it woke (`promsched_event_loop_lag_seconds`). Everything the operator does
shares this one loop, Kopf's watches and the scheduling cycles alike, so work that holds it (parsing a
large answer, a burst of events) delays every pod behind it by as much; the histogram shows the stalls
that put pods into the latency's tail. Each observation says whether a metrics refresh ran while it was
awaited (`during_refresh`), so the stalls a refresh adds show apart from those of scheduling itself."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from promsched.scheduling import telemetry

# Often enough to catch stalls of a few tens of milliseconds without costing the loop anything measurable.
LAG_PROBE_SECONDS: Final = 0.1


@dataclass(slots=True)
class Refreshes:
    """How many metrics refreshes (of any policy) have started and finished."""

    started: int = 0
    finished: int = 0


def record(lag: float, during_refresh: bool) -> None:
    """Into `promsched_event_loop_lag_seconds`."""
    telemetry.event_loop_lag.labels("true" if during_refresh else "false").observe(lag)


async def watch_loop_lag(
    *,
    refreshes: Refreshes | None = None,
    interval: float = LAG_PROBE_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    observe: Callable[[float, bool], None] = record,
) -> None:
    """Record the loop's lag every `interval` (into the histogram, or to `observe`), until cancelled,
    each with whether one of `refreshes` ran at some time while it was awaited: one had started and not
    finished when it was asked for, or one started before it came."""
    refreshes = refreshes or Refreshes()
    while True:
        asked, finished = clock(), refreshes.finished
        await sleep(interval)
        observe(max(0.0, clock() - asked - interval), refreshes.started > finished)
