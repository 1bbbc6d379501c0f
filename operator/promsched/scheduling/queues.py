"""The scheduling queue, shaped like kube-scheduler's: active, backoff and unschedulable.

- active: pods ready for a cycle, highest priority first, then by arrival;
- backoff: pods whose last attempt failed with an error, waiting 1 s doubling to 10 s;
- unschedulable: pods that fit nowhere, parked until a cluster event that may make them fit (one the
  filters that rejected them declared: a node added or changed, a pod deleted, a policy changed...)
  or until they have waited `max_unschedulable_seconds` (kube's podMaxInUnschedulablePodsDuration,
  5 minutes), when they go back through backoff.

Each pod is in the queue at most once, keyed by UID. A pod popped for a cycle is "in flight" until the
cycle says `done`, `backoff` or `unschedulable`; an update that arrives meanwhile is kept for the next
attempt instead of making a second entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
import itertools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from promsched.scheduling.filters import QUEUEING_HINTS
from promsched.scheduling.framework import ClusterChange, ClusterEvent, QueueingHint
from promsched.scheduling.objects.pods import PodInfo

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0
MAX_UNSCHEDULABLE_SECONDS = 300.0


class Where(Enum):
    ACTIVE = "active"
    BACKOFF = "backoff"
    UNSCHEDULABLE = "unschedulable"
    IN_FLIGHT = "in_flight"


@dataclass
class QueuedPod:
    pod: PodInfo
    added_at: float  # when the pod first entered the queue: the start of its scheduling latency
    attempts: int = 0
    where: Where = Where.ACTIVE
    ready_at: float = 0.0  # backoff: when it may go back to active
    parked_at: float = 0.0  # unschedulable: when it was parked
    lifted_by: ClusterEvent = ClusterEvent.ANY  # unschedulable: the events that may make it fit
    sequence: int = 0  # heap entries carrying another sequence are stale
    pending_update: bool = False


NO_CHANGE: Final = ClusterChange()


@dataclass
class SchedulingQueue:
    clock: Callable[[], float] = time.monotonic
    max_unschedulable_seconds: float = MAX_UNSCHEDULABLE_SECONDS
    entries: dict[str, QueuedPod] = field(default_factory=dict)
    _active: list[tuple[int, int, str]] = field(default_factory=list)
    _backoff: list[tuple[float, int, str]] = field(default_factory=list)
    _sequence: itertools.count[int] = field(default_factory=itertools.count)
    _wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    # uids of the entries parked unschedulable, so cluster changes visit those alone, not every pod.
    _parked: set[str] = field(default_factory=set)
    # Per event, which parked pods a change may help (the filters' queueing hints).
    hints: Mapping[ClusterEvent, tuple[QueueingHint, ...]] = field(default_factory=lambda: QUEUEING_HINTS)

    def __len__(self) -> int:
        return len(self.entries)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys((w.value for w in Where), 0)
        for entry in self.entries.values():
            counts[entry.where.value] += 1
        return counts

    def _push_active(self, entry: QueuedPod) -> None:
        self._parked.discard(entry.pod.uid)
        entry.where = Where.ACTIVE
        entry.sequence = next(self._sequence)
        heapq.heappush(self._active, (-entry.pod.priority, entry.sequence, entry.pod.uid))
        self._wakeup.set()

    def _push_backoff(self, entry: QueuedPod, since: float | None = None) -> None:
        self._parked.discard(entry.pod.uid)
        entry.where = Where.BACKOFF
        entry.sequence = next(self._sequence)
        entry.ready_at = (self.clock() if since is None else since) + backoff_seconds(entry.attempts)
        heapq.heappush(self._backoff, (entry.ready_at, entry.sequence, entry.pod.uid))
        self._wakeup.set()

    def add_or_update(self, pod: PodInfo) -> None:
        """A pending pod was seen (added or changed). A pod whose spec changed is retried at once unless
        it is in backoff: the change may be what makes it schedulable."""
        entry = self.entries.get(pod.uid)
        if entry is None:
            entry = QueuedPod(pod, added_at=self.clock())
            self.entries[pod.uid] = entry
            self._push_active(entry)
            return
        changed = _changed(entry.pod, pod)
        entry.pod = pod
        if not changed:
            return
        if entry.where is Where.IN_FLIGHT:
            entry.pending_update = True
        elif entry.where is Where.UNSCHEDULABLE:
            self._push_active(entry)

    def remove(self, uid: str) -> QueuedPod | None:
        """The pod was deleted or bound (by us or another scheduler): it leaves the queue."""
        self._parked.discard(uid)
        return self.entries.pop(uid, None)

    def _parked_entries(self) -> list[QueuedPod]:
        return [self.entries[uid] for uid in self._parked]

    def _flush_backoff(self, now: float) -> None:
        while self._backoff and self._backoff[0][0] <= now:
            _, sequence, uid = heapq.heappop(self._backoff)
            entry = self.entries.get(uid)
            if entry is not None and entry.sequence == sequence and entry.where is Where.BACKOFF:
                self._push_active(entry)

    def _flush_unschedulable(self, now: float) -> None:
        for entry in self._parked_entries():
            if now - entry.parked_at >= self.max_unschedulable_seconds:
                self._push_active(entry)

    def pop_nowait(self) -> QueuedPod | None:
        now = self.clock()
        self._flush_backoff(now)
        while self._active:
            _, sequence, uid = heapq.heappop(self._active)
            entry = self.entries.get(uid)
            if entry is not None and entry.sequence == sequence and entry.where is Where.ACTIVE:
                entry.where = Where.IN_FLIGHT
                entry.attempts += 1
                entry.pending_update = False
                return entry
        return None

    async def pop(self, flush_interval: float = 1.0) -> QueuedPod:
        """The next pod to schedule; waits for one, waking for backoffs and periodic flushes."""
        while True:
            entry = self.pop_nowait()
            if entry is not None:
                return entry
            self._flush_unschedulable(self.clock())
            self._wakeup.clear()
            wait = flush_interval
            if self._backoff:
                wait = min(wait, max(0.0, self._backoff[0][0] - self.clock()))
            # asyncio.timeout, not wait_for: wait_for (3.11) wraps the wait in a task of its own, two
            # more loop turns before a pod added to an empty queue is taken, and ~9 us more CPU.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wakeup.wait()

    def done(self, uid: str) -> None:
        """The pod is assumed onto a node; it leaves the queue (a failed bind re-adds it)."""
        self.remove(uid)

    def backoff(self, uid: str) -> None:
        """The attempt failed with an error (API, binding); retry after the pod's backoff."""
        entry = self.entries.get(uid)
        if entry is not None:
            self._push_backoff(entry)

    def unschedulable(self, uid: str, lifted_by: ClusterEvent = ClusterEvent.ANY) -> None:
        """No node fits; park it until one of the `lifted_by` events. A change of the pod seen during
        the cycle retries it."""
        entry = self.entries.get(uid)
        if entry is None:
            return
        if entry.pending_update:
            self._push_backoff(entry)
            return
        entry.where = Where.UNSCHEDULABLE
        entry.parked_at = self.clock()
        entry.lifted_by = lifted_by
        self._parked.add(uid)

    def requeue(self, pod: PodInfo, added_at: float, attempts: int) -> None:
        """A pod whose binding failed comes back through backoff, keeping its history."""
        entry = QueuedPod(pod, added_at=added_at, attempts=attempts)
        self.entries[pod.uid] = entry
        self._push_backoff(entry)

    def retry(self, uids: Iterable[str]) -> int:
        """These pods changed in a way no filter's event covers (a preemptor took the node they were
        nominated to, so their nomination was cleared): the parked ones get another try, through backoff
        if theirs is not over, as kube requeues an unschedulable pod on its update."""
        moved = 0
        for uid in uids:
            entry = self.entries.get(uid)
            if entry is not None and entry.where is Where.UNSCHEDULABLE:
                self._push_backoff(entry, since=entry.parked_at)
                moved += 1
        self._flush_backoff(self.clock())
        return moved

    def move_all_to_active(
        self, reason: str, event: ClusterEvent = ClusterEvent.ANY, change: ClusterChange = NO_CHANGE
    ) -> int:
        """The cluster changed (`reason`, an `event`); the parked pods it may help get another try,
        through backoff if theirs is not over: those rejected by a filter that declared the event, and
        of those, where the filters have hints for it, the pods one of them judges `change` may help
        (kube's queueing hints)."""
        hints = self.hints.get(event)
        moved = 0
        for entry in self._parked_entries():
            if entry.lifted_by & event and (hints is None or any(hint(entry.pod, change) for hint in hints)):
                self._push_backoff(entry, since=entry.parked_at)
                moved += 1
        self._flush_backoff(self.clock())
        return moved


def _changed(old: PodInfo, new: PodInfo) -> bool:
    """Whether an update can change where the pod fits; our own status writes (PodScheduled, a
    nomination) cannot."""
    unchanged = dataclasses.replace(
        old,
        resource_version=new.resource_version,
        scheduled_condition=new.scheduled_condition,
        nominated_node_name=new.nominated_node_name,  # our own preemption's
        disruption_target=new.disruption_target,
    )
    return unchanged != new


def backoff_seconds(attempts: int) -> float:
    """1 s after the first failed attempt, doubling up to 10 s."""
    return min(MAX_BACKOFF, INITIAL_BACKOFF * 2.0 ** max(0, attempts - 1))
