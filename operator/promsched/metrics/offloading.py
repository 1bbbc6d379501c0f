"""Pure work on Prometheus answers (parsing, sampling, scoring every node), run off the event loop.

On one thread of its own, not asyncio's default pool: while several threads take the GIL in turn, the
event loop waits behind each of them (up to the interpreter's switch interval apiece); with one, behind
one. At 5000 nodes the loop's longest wait per refresh fell by about a third, median 52 -> 33 ms
(`python -m bench.refresh_micro`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

WORKER_NAME = "promsched-metrics"
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix=WORKER_NAME)


async def off_loop(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`work(*args, **kwargs)` on the metrics worker thread."""
    return await asyncio.get_running_loop().run_in_executor(_WORKER, functools.partial(work, *args, **kwargs))
