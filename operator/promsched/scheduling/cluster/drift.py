"""Telling drift from events in flight: what the intake's lists changed in the cache, until a watch event
explains it or it is reported.

A list read while a watch event is on its way finds what the event was about to tell, and that is no
drift. A difference that no watch event of its object, at the difference's version or later, explains
within `grace` seconds is drift: logged and counted in promsched_cache_drift_total{kind}. Either way
the list has repaired the cache already.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from promsched.scheduling import telemetry

_CHANGES = {"removed": "was deleted", "added": "was missing", "updated": "was held in an older state"}


@dataclass(frozen=True, slots=True)
class Difference:
    """What a list changed in the cache. A watch event of the object at `version` or later explains it."""

    resource: str
    key: str
    name: str
    change: str  # "removed", "added" (the cache lacked it) or "updated" (it held an older state)
    version: int | None


def shown(namespace: str, name: str) -> str:
    """An object's name as the drift report shows it."""
    return f"{namespace}/{name}" if namespace else name


class Differences:
    """The differences lists found that no watch event has explained yet. `spawn` runs each batch's
    wait, `sleep` waits, and reports go to `logger` (the intake's, which users filter by)."""

    def __init__(
        self,
        spawn: Callable[[Awaitable[None]], object],
        sleep: Callable[[float], Awaitable[None]],
        grace: float,
        logger: logging.Logger,
    ) -> None:
        self.spawn = spawn
        self.sleep = sleep
        self.grace = grace
        self.logger = logger
        self.unexplained: dict[tuple[str, str], Difference] = {}

    def found(self, changes: list[Difference]) -> None:
        """A later list (not the first) changed these, as it read them: drift, unless explained within the
        grace."""
        if not changes:
            return  # the usual case, on every page
        for difference in changes:
            self.unexplained[(difference.resource, difference.key)] = difference
        self.spawn(self._report(changes))

    def explain(self, resource: str, key: str, version: int | None) -> None:
        """A watch event of an object: what a list changed of it was this event in flight, not drift."""
        if not self.unexplained:
            return  # the usual case, on every event
        difference = self.unexplained.get((resource, key))
        if difference is None:
            return
        if version is None or difference.version is None or version >= difference.version:
            del self.unexplained[(resource, key)]

    async def _report(self, changes: list[Difference]) -> None:
        await self.sleep(self.grace)
        for difference in changes:
            where = (difference.resource, difference.key)
            if self.unexplained.get(where) is not difference:
                continue  # explained by a watch event, or superseded by a later list's finding
            del self.unexplained[where]
            telemetry.cache_drift.labels(difference.resource).inc()
            self.logger.warning(
                "The cache had drifted from the cluster (repaired): %s %s %s",
                difference.resource,
                difference.name,
                _CHANGES[difference.change],
            )
