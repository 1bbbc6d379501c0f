"""What the scheduler tells a pod: that it was bound, why it waits, that it was evicted.

Events (as kube-scheduler's recorder writes them, see `eventing`) and PodScheduled conditions (patched
only when they change) go through one bounded write queue behind the bindings (see `writing`).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Mapping

from promsched.kube import requests
from promsched.kube.sending import ApiError, SupportsSend
from promsched.scheduling import telemetry
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.reporting.eventing import EventRecorder, PodRef
from promsched.scheduling.reporting.writing import WriteQueue


class PodReporter:
    """Owns the event recorder and the write queue. `pending` holds the newest state the watch
    delivered of each unbound live pod, by uid (the intake's); `spawn` starts the queue's writers."""

    def __init__(
        self,
        sender: SupportsSend,
        pending: Mapping[str, PodInfo],
        *,
        spawn: Callable[[Awaitable[None]], asyncio.Task[None]],
        instance: str = "",
    ) -> None:
        self.sender = sender
        self.pending = pending
        # Events come from the scheduler name's controller (kube-scheduler: its profile's schedulerName).
        self.events = EventRecorder("promsched", instance=instance or socket.gethostname())
        self.writes = WriteQueue(self._send, spawn)

    def report_scheduled(self, pod: PodInfo, node: str, scheduler_name: str) -> None:
        """kube's Scheduled event on a pod its binding bound."""
        note = f"Successfully assigned {pod.key} to {node}"
        self._event(_ref(pod), "Normal", "Scheduled", "Binding", note, scheduler_name)

    def report_unschedulable(
        self, pod: PodInfo, message: str, scheduler_name: str, reason: str = "Unschedulable"
    ) -> None:
        """PodScheduled=False (when it changed) and a FailedScheduling event (folded into its series);
        `reason` SchedulerError for an error rather than a pod that fits nowhere."""
        current = self.pending.get(pod.uid, pod)  # the newest state the watch delivered
        patch = current.scheduled_condition_patch("False", reason, message, requests.now_rfc3339())
        if patch is not None:
            self.writes.submit(
                "condition", pod.uid, requests.patch_pod_condition(pod.namespace, pod.name, patch)
            )
        self._event(_ref(pod), "Warning", "FailedScheduling", "Scheduling", message, scheduler_name)

    def report_malformed(self, metadata: Mapping[str, str], message: str, scheduler_name: str) -> None:
        """A pod whose spec cannot be parsed: no condition of it is known, so it is written as is."""
        pod = PodRef(
            metadata.get("namespace") or "default", metadata.get("name") or "", metadata.get("uid") or ""
        )
        unknown = PodInfo(pod.namespace, pod.name, uid=pod.uid)
        condition = unknown.scheduled_condition_patch(
            "False", "Unschedulable", message, requests.now_rfc3339()
        )
        assert condition is not None  # a pod with no known condition always gets one
        self.writes.submit(
            "condition", pod.uid, requests.patch_pod_condition(pod.namespace, pod.name, condition)
        )
        self._event(pod, "Warning", "FailedScheduling", "Scheduling", message, scheduler_name)

    def report_preempted(self, victim: PodInfo, preemptor: PodInfo, node: str, scheduler_name: str) -> None:
        """kube's Preempted event on an evicted victim, naming the preemptor."""
        note = f"Preempted by pod {preemptor.uid} on node {node}"
        self._event(_ref(victim), "Normal", "Preempted", "Preempting", note, scheduler_name, _ref(preemptor))

    def report_rebalanced(self, pod: PodInfo, note: str, scheduler_name: str) -> None:
        """An Event on a pod evicted off a hot node, with the values that moved it."""
        self._event(_ref(pod), "Normal", "Rebalanced", "Evicting", note, scheduler_name)

    def _event(
        self,
        pod: PodRef,
        event_type: str,
        reason: str,
        action: str,
        note: str,
        controller: str,
        related: PodRef | None = None,
    ) -> None:
        limited = self.events.limited
        request = self.events.record(pod, event_type, reason, action, note, controller, related)
        self._write_events(self.events.take_finished())
        if request is not None:
            if not self._write_event(request) and request.method == "POST":
                # Never created: the next occurrence must create it rather than patch a missing Event.
                self.events.forget_event(pod.uid, _event_name(request))
        elif self.events.limited > limited:
            telemetry.api_writes_dropped.labels("event").inc()

    def _write_event(self, request: requests.Request) -> bool:
        """Queue an Event's create or series patch; False when dropped. One Event's writes share a slot
        (sent in order, see `writing`); a series patch for an Event whose create still waits goes out
        with it, as one create that holds the count."""
        name = _event_name(request)
        waiting = self.writes.pending("event", name)
        if request.method == "PATCH" and waiting is not None and waiting.method == "POST":
            request = requests.Request(waiting.method, waiting.path, {**waiting.body, **request.body})
        return self.writes.submit("event", name, request)

    def _write_events(self, writes: list[requests.Request]) -> None:
        for request in writes:
            self._write_event(request)

    async def _send(self, request: requests.Request) -> None:
        try:
            await self.sender.send(request)
        except ApiError as error:
            if error.status != 404 or request.method != "PATCH" or "/events/" not in request.path:
                raise
            # The Event is gone (deleted, or past the API server's event TTL): created again, as
            # client-go's recorder does.
            create = self.events.recreate(_event_name(request))
            if create is None:
                raise
            await self.sender.send(create)

    def forget(self, uid: str) -> None:
        """A pod no longer waiting (bound or gone): its event series end, their final counts written."""
        self._write_events(self.events.forget(uid))

    def refresh_events(self) -> None:
        """Write the event series' counts that grew (kube: every 30 minutes)."""
        self._write_events(self.events.refresh())

    def finish_events(self) -> None:
        """Write the final counts of the series idle past their end (kube: every 6 minutes)."""
        self._write_events(self.events.finish())

    async def close(self) -> None:
        """Write every series' count the API server lacks, and wait for the queue to be sent (bound
        the wait: the shutdown cannot take long)."""
        self._write_events(self.events.finish(everything=True))
        await self.writes.drain()


def _event_name(request: requests.Request) -> str:
    """The Event a create (by its body) or a series patch (by its path) writes."""
    if request.method == "PATCH":
        return request.path.rsplit("/", 1)[-1]
    return str(request.body["metadata"]["name"])


def _ref(pod: PodInfo) -> PodRef:
    return PodRef(pod.namespace, pod.name, pod.uid)
