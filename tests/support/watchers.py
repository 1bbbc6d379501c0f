"""A scripted stand-in for `KubeClient.watch`, and running what follows it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Mapping
from typing import Any

import pytest

from promsched.kube.requests import Request
from support.polling import eventually_async

Event = tuple[str, Mapping[str, Any]]


class ScriptedWatcher:
    """Answers each watch with the next script: events to stream (then the stream ends), or an error
    raised after them; once the scripts run out, a watch stays open and silent."""

    def __init__(self, *scripts: tuple[list[Event], BaseException | None]) -> None:
        self.scripts = list(scripts)
        self.requests: list[Request] = []
        self.timeouts: list[float] = []

    async def watch(self, request: Request, inactivity_timeout: float) -> AsyncIterator[Event]:
        self.requests.append(request)
        self.timeouts.append(inactivity_timeout)
        if not self.scripts:
            await asyncio.Event().wait()
        events, error = self.scripts.pop(0)
        for event in events:
            yield event
        if error is not None:
            raise error

    def versions(self) -> list[str | None]:
        return [request.params.get("resourceVersion") for request in self.requests]


async def follow_until(
    following: Coroutine[Any, Any, object], watcher: ScriptedWatcher, watches: int
) -> None:
    """Run `following`, a follower that runs until cancelled, until it has asked `watcher` for
    `watches` watches; then cancel it."""
    task = asyncio.create_task(following)
    try:
        await eventually_async(lambda: len(watcher.requests) >= watches, what=f"{watches} watches")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
