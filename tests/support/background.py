"""A `spawn` for code under test that runs background work: its tasks, which the test can wait for."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable


class Background:
    """Called as `spawn(work)`; keeps every task it starts so the test can settle or stop them."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[None]] = []

    def __call__(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self.tasks.append(task)
        return task

    async def settle(self) -> None:
        """Wait until every task is done, those the tasks spawn meanwhile included."""
        while not all(task.done() for task in self.tasks):
            await asyncio.wait(self.tasks)

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
