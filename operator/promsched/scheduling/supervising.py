"""The operator's long-lived background tasks, started and watched by one supervisor.

A task that ends by an unexpected exception is logged with its traceback, counted
(`promsched_task_restarts_total{task}`) and started again after a pause that doubles from
`RESTART_PAUSE_SECONDS` up to `RESTART_PAUSE_CAP_SECONDS`, back to the first once a run lasted longer than
the cap (as client-go restarts its loops: wait.BackoffUntil with a resetting backoff). A task that
failed `FAILURES_LIMIT` times within `FAILURES_WINDOW_SECONDS` is reported by `failing()`: /healthz fails
naming it, and the kubelet restarts the pod. With a 1 s pause doubling, five failures in a row take
about 15 s, well within the window, while a rare failure (a bug one object trips now and then) never
adds up to five. A cancelled task is not restarted, and one that returns is done.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

from promsched.scheduling import telemetry

logger = logging.getLogger(__name__)

RESTART_PAUSE_SECONDS: Final = 1.0
RESTART_PAUSE_CAP_SECONDS: Final = 60.0
FAILURES_LIMIT: Final = 5
FAILURES_WINDOW_SECONDS: Final = 5 * 60.0

Work = Callable[[], Awaitable[None]]


class Supervisor:
    """Runs each task given to `start` until it returns or is cancelled, restarting it after a failure.
    Time is told by `clock` and waited with `sleep`."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.clock = clock
        self.sleep = sleep
        self._tasks: set[asyncio.Task[None]] = set()
        # The latest failures of each task name, up to FAILURES_LIMIT of them.
        self._failures: dict[str, deque[float]] = {}

    def start(self, name: str, work: Work) -> asyncio.Task[None]:
        """Run `work()` under supervision as task `name` (the metric's label: one per kind of task)."""
        task = asyncio.create_task(self._supervise(name, work), name=f"promsched-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def failing(self) -> list[str]:
        """The tasks that failed FAILURES_LIMIT times within the last FAILURES_WINDOW_SECONDS."""
        now = self.clock()
        return sorted(
            name
            for name, failures in self._failures.items()
            if len(failures) == FAILURES_LIMIT and now - failures[0] <= FAILURES_WINDOW_SECONDS
        )

    async def close(self) -> None:
        """Cancel every supervised task and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _supervise(self, name: str, work: Work) -> None:
        pause = RESTART_PAUSE_SECONDS
        while True:
            started = self.clock()
            try:
                await work()
                return
            except Exception:
                failed = self.clock()
                if failed - started > RESTART_PAUSE_CAP_SECONDS:
                    pause = RESTART_PAUSE_SECONDS  # it had been working: a new run of failures
                self._failures.setdefault(name, deque(maxlen=FAILURES_LIMIT)).append(failed)
                telemetry.task_restarts.labels(name).inc()
                logger.exception("Background task %s failed; restarting it in %.0fs", name, pause)
            await self.sleep(pause)
            pause = min(pause * 2, RESTART_PAUSE_CAP_SECONDS)
