"""Parking pods in a scheduler's queue and seeing which ones a cluster change gives another try."""

from __future__ import annotations

from typing import Any

from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.queues import Where
from promsched.scheduling.schedulers import Scheduler


class NoSender:
    """A sender for schedulers that must write nothing."""

    async def send(self, request: Any) -> Any:
        raise AssertionError(f"nothing should be sent: {request.method} {request.path}")


def park(scheduler: Scheduler, *pods: PodInfo) -> None:
    """Each pod tried once and parked as unschedulable."""
    for waiting in pods:
        scheduler.queue.remove(waiting.uid)
        scheduler.queue.add_or_update(waiting)
        entry = scheduler.queue.pop_nowait()
        assert entry is not None
        scheduler.queue.unschedulable(entry.pod.uid)


def retried(scheduler: Scheduler) -> set[str]:
    """The names of the pods no longer parked."""
    return {
        entry.pod.name for entry in scheduler.queue.entries.values() if entry.where is not Where.UNSCHEDULABLE
    }
