"""Pure work on Prometheus answers (parsing, sampling, scoring every node), run off the event loop, and
paced so that it runs while the loop waits rather than while it schedules.

On one thread of its own, not asyncio's default pool: while several threads take the GIL in turn, the
event loop waits behind each of them (up to the interpreter's switch interval apiece); with one, behind
one. At 5000 nodes the loop's longest wait per refresh fell by about a third, median 52 -> 33 ms
(`python -m bench.refresh_micro`).

Sharing the GIL, the thread still halved the loop's speed whenever both had work: a refresh at 5000 nodes
is a quarter to half a second of CPU. So the work walks its items through `paced`, which on the worker
pauses every `PACE_EVERY` items until the loop waits for I/O (or `MAX_PAUSE_SECONDS` has passed, so that
a loop busy for long still sees its refresh end). A loop knows when it waits only if it came from
`new_event_loop` (the operator's): its selector says so. Under any other loop nothing pauses. At 5000
nodes the loop's lag until a refresh returned, p99 per run of `python -m bench.refresh_micro --nodes 5000
--rounds 6`: a median of 13.9 ms over 11 runs (9.4-17.1), against 17.5 (17.0-19.3, 7 runs) unpaced
(`--asyncio-loop`), interleaved.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import selectors
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

WORKER_NAME = "promsched-metrics"
# Items between pauses: a few tenths of a millisecond of work, all a loop that wakes meanwhile waits.
PACE_EVERY = 256
# The longest pause: a loop busy for a whole second (a burst of pods) still lets a refresh through, at
# some 1.2 s more at 5000 nodes (about 240 pauses).
MAX_PAUSE_SECONDS = 0.005

_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix=WORKER_NAME)


async def off_loop(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`work(*args, **kwargs)` on the metrics worker thread."""
    return await asyncio.get_running_loop().run_in_executor(_WORKER, functools.partial(work, *args, **kwargs))


class LoopWaits:
    """Whether the operator's event loop waits for I/O, told by its selector, and the worker's pause
    until it does. The loop's side is two attribute writes per wait, and a lock released only when the
    worker is paused: 0.8 µs more per wait than the plain selector (timeit on a ready socket), where a
    `threading.Event` set and cleared each time would cost several."""

    def __init__(self) -> None:
        self.loop_waits = False
        self.worker_paused = False
        # Taken by the worker as it pauses, released by the loop to wake it.
        self._wakeup = threading.Lock()

    def loop_begins_waiting(self) -> None:
        self.loop_waits = True
        if self.worker_paused and self._wakeup.locked():
            self._wakeup.release()

    def loop_ends_waiting(self) -> None:
        self.loop_waits = False

    def pause(self, seconds: float) -> None:
        """Return once the loop waits, or after `seconds`."""
        if self.loop_waits:
            return
        self._wakeup.acquire(blocking=False)
        self.worker_paused = True
        # Asked again now that the loop would wake us: it may have begun waiting in between.
        if not self.loop_waits:
            self._wakeup.acquire(timeout=seconds)
        self.worker_paused = False


class _Operators:
    """The waits of the operator's loop, while one is open."""

    waits: LoopWaits | None = None


class _WaitSignallingSelector(selectors.DefaultSelector):
    """The platform's selector, saying when the loop waits. asyncio asks it with timeout 0 while
    callbacks are ready, and with a longer one (or None) only when there is nothing to do but wait."""

    def __init__(self, waits: LoopWaits) -> None:
        super().__init__()
        self._waits = waits

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout <= 0:
            return super().select(timeout)
        self._waits.loop_begins_waiting()
        try:
            return super().select(timeout)
        finally:
            self._waits.loop_ends_waiting()

    def close(self) -> None:
        if _Operators.waits is self._waits:
            _Operators.waits = None
        super().close()


def new_event_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose waits for I/O the metrics worker's paced work runs in (`paced`)."""
    waits = LoopWaits()
    _Operators.waits = waits
    return asyncio.SelectorEventLoop(_WaitSignallingSelector(waits))


def _pausing() -> LoopWaits | None:
    """What pauses wait on: on the metrics worker under the operator's loop, its waits; else None."""
    waits = _Operators.waits
    on_worker = threading.current_thread().name.startswith(WORKER_NAME)
    return waits if waits is not None and on_worker else None


def paced(items: Iterable[T]) -> Iterator[T]:
    """`items`; on the metrics worker, with a pause before every `PACE_EVERY` of them until the event loop
    waits for I/O (at most `MAX_PAUSE_SECONDS`). Elsewhere, or under a loop of another kind, no pauses."""
    waits = _pausing()
    if waits is None:
        yield from items
        return
    iterator = iter(items)
    while chunk := tuple(itertools.islice(iterator, PACE_EVERY)):
        waits.pause(MAX_PAUSE_SECONDS)
        yield from chunk


def let_go(*held: object, emptied: Iterable[dict[Any, Any]] = ()) -> None:
    """Let go of `held` on the metrics worker once the event loop waits, after emptying the dicts
    `emptied` there in paced steps. Freeing a 5000-node snapshot, or its scores, takes 3-5 ms in one go
    wherever the last reference goes: hand over the last ones (and only dicts no one else reads to empty)."""
    _WORKER.submit(_let_go, list(held), list(emptied))


def _let_go(held: list[object], emptied: list[dict[Any, Any]]) -> None:
    for entries in emptied:
        for key in paced(list(entries)):
            del entries[key]
    pause()
    held.clear()


async def off_loop_then_let_go(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`off_loop(work, ...)` for work that is the last use of a large argument (a query's answer, a series
    per node: 1.3-3.5 ms to free at 5000 nodes): the arguments are let go on the worker after (`let_go`);
    those held elsewhere too (a plugin, the node directory) only lose this reference."""
    done = await off_loop(work, *args, **kwargs)
    let_go(*args, *kwargs.values())
    return done


def pause() -> None:
    """The pause `paced` makes, before one long step that cannot be paced (a JSON answer decoded in one
    call)."""
    waits = _pausing()
    if waits is not None:
        waits.pause(MAX_PAUSE_SECONDS)
