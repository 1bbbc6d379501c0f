"""Following a kind's objects on a watch, resumed and restarted as client-go's reflector does.

A watch goes on from the resourceVersion of a list; when the API server ends it (after `WATCH_SECONDS`),
or it breaks or falls silent, it is opened again from the last resourceVersion seen, which bookmarks keep
fresh. One the API server answers 410 Gone (that version is too old to resume from) starts anew from
what the owner's `expired` gives, having listed again or asked for a list; other failures are logged
and retried after a pause.

As in client-go, a watch that ends within a second having brought nothing (not even a bookmark) is a
failure too ("very short watch"): an API server or proxy that closes every watch at once must not be
asked again in a loop. The pause doubles with each such watch or failure in a row, up to
`MAX_RETRY_SECONDS` (client-go's backoff manager: 0.8 s to 30 s), and starts over after a watch that
worked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final, NoReturn, Protocol

import aiohttp

from promsched.kube.requests import Request, watch_objects
from promsched.kube.sending import ApiError

# client-go's reflector asks for a watch of 5-10 minutes; any length works, this one is in between.
WATCH_SECONDS: Final = 450
RETRY_SECONDS: Final = 1.0
MAX_RETRY_SECONDS: Final = 30.0
# A watch ended sooner than this with no event did not work (client-go's "very short watch").
SHORT_WATCH_SECONDS: Final = 1.0


class SupportsWatch(Protocol):
    """`KubeClient.watch`'s shape: a watch's (type, object) events until the API server ends the stream;
    an ERROR event raises its Status as an ApiError (410 Gone: too old to resume from)."""

    def watch(
        self, request: Request, inactivity_timeout: float
    ) -> AsyncIterator[tuple[str, Mapping[str, Any]]]: ...


class Reflector:
    """Hands each event of the objects at `path` that match `field_selector` to `deliver`, bookmarks
    aside (they only move the version on). `expired` is awaited for the version to watch from when
    there is none to resume from: after 410 Gone, or at the start when `follow` is given None; a
    failure of it is retried as a watch's is. `what` names the objects in log messages. It pauses with
    `sleep` and tells how long a watch lasted by `clock`."""

    def __init__(
        self,
        watcher: SupportsWatch,
        path: str,
        field_selector: str,
        deliver: Callable[[str, Mapping[str, Any]], None],
        expired: Callable[[], Awaitable[str]],
        *,
        what: str,
        inactivity_timeout: float,
        retry_seconds: float = RETRY_SECONDS,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger | None = None,
    ) -> None:
        self.watcher = watcher
        self.path = path
        self.field_selector = field_selector
        self.deliver = deliver
        self.expired = expired
        self.what = what
        self.inactivity_timeout = inactivity_timeout
        self.retry_seconds = retry_seconds
        self.sleep = sleep
        self.clock = clock
        # The owner's logger, so messages keep the name its users filter by.
        self.logger = logger or logging.getLogger(__name__)

    async def follow(self, version: str | None) -> NoReturn:
        """Watch from `version` ("": the current state first, as ADDED events; None: from what
        `expired` gives) until cancelled."""
        pause = self.retry_seconds
        while True:
            opened: float | None = None  # when the watch was asked for, once it was
            events = 0
            ended = False
            try:
                if version is None:
                    version = await self.expired()
                request = watch_objects(
                    self.path, version, {"fieldSelector": self.field_selector}, WATCH_SECONDS
                )
                opened = self.clock()
                async for event_type, obj in self.watcher.watch(request, self.inactivity_timeout):
                    events += 1
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event_type != "BOOKMARK":
                        self.deliver(event_type, obj)
                ended = True  # by the API server: resumed where it stopped, unless it ended at once
            except ApiError as error:
                # A 410 from `expired` itself (version still None) is a failure like any other.
                if error.status == 410 and version is not None:
                    self.logger.info("The watch of %s expired (%s); starting it anew", self.what, error)
                    version = None
                    continue
                self.logger.warning("The watch of %s failed (retrying): %s", self.what, error)
            except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as error:
                # A connection reset, a stream silent past the inactivity timeout, or a line cut short.
                described = str(error) or type(error).__name__
                self.logger.warning("The watch of %s broke (resuming): %s", self.what, described)
            worked = events > 0 or (opened is not None and self.clock() - opened >= SHORT_WATCH_SECONDS)
            if worked:
                pause = self.retry_seconds
                if ended:
                    continue
            elif ended:
                self.logger.warning(
                    "The watch of %s closed at once with nothing in it (resuming in %.1fs)", self.what, pause
                )
            await self.sleep(pause)
            if not worked:
                pause = min(pause * 2, MAX_RETRY_SECONDS)
