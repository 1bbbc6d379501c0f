"""The binding cycle, and what the scheduler tells a pod: bindings first, then events and conditions.

A pod whose claims need volumes bound first has them bound before (see `prebinding`), without taking a
slot meanwhile. A binding is sent at once, at most `concurrency` of them in flight: the scheduling loop
waits for room (`room`) before it takes the next pod, so a burst waits in the queue, not as decisions
held here.
Events (as kube-scheduler's recorder writes them, see `eventing`) and PodScheduled conditions (patched
only when they change) go through one bounded write queue behind the bindings (see `writing`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import aiohttp

from promsched.api.annotations import DECISION_ANNOTATION
from promsched.kube import requests
from promsched.kube.sending import ApiError, SupportsSend
from promsched.scheduling import telemetry
from promsched.scheduling.binding.prebinding import BIND_TIMEOUT_SECONDS, VolumeBinder, VolumeBindingFailed
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.filters.unschedulable import NodeUnschedulable
from promsched.scheduling.filters.volume_binding_plans import VolumePlan
from promsched.scheduling.framework import ClusterEvent
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.policies.recording import DecisionRecord
from promsched.scheduling.policies.runtimes import PolicyRuntime
from promsched.scheduling.queues import QueuedPod, SchedulingQueue
from promsched.scheduling.reporting.eventing import EventRecorder, PodRef
from promsched.scheduling.reporting.writing import WriteQueue

logger = logging.getLogger(__name__)

# Bindings (each with its Scheduled event) in flight: each holds a connection to the API server.
BIND_CONCURRENCY: Final = 32
# Events come from the scheduler name's controller (kube-scheduler: its profile's schedulerName).
_CORDON: Final = NodeUnschedulable()


class Binder:
    def __init__(
        self,
        sender: SupportsSend,
        cache: ClusterCache,
        queue: SchedulingQueue,
        pending: Mapping[str, PodInfo],
        *,
        spawn: Callable[[Awaitable[None]], asyncio.Task[None]],
        concurrency: int = BIND_CONCURRENCY,
        instance: str = "",
        bind_timeout: float = BIND_TIMEOUT_SECONDS,
    ) -> None:
        self.sender = sender
        self.cache = cache
        self.queue = queue
        self.pending = pending  # unbound live pods by uid (the intake's)
        self.spawn = spawn
        self.concurrency = concurrency
        self.in_flight = 0
        self.room = asyncio.Event()
        self.room.set()
        self.events = EventRecorder("promsched", instance=instance or socket.gethostname())
        self.writes = WriteQueue(self._send, spawn)
        self.volumes = VolumeBinder(sender, cache, timeout=bind_timeout)

    # ----- bindings ---------------------------------------------------------------------------------

    def bind(
        self,
        entry: QueuedPod,
        runtime: PolicyRuntime,
        decision: DecisionRecord,
        node: str,
        annotation: str,
        volumes: VolumePlan | None = None,
    ) -> None:
        """Bind the (assumed) pod in the background; the loop may go on unless the cap is reached.
        `volumes` are assumed at once and bound first."""
        if volumes:
            self.volumes.assume(volumes, node)
            self.spawn(self._bind_volumes(entry, runtime, decision, node, annotation, volumes))
            return
        self.in_flight += 1
        if self.in_flight >= self.concurrency:
            self.room.clear()
        self.spawn(self._bind(entry, runtime, decision, node, annotation))

    async def _bind(
        self, entry: QueuedPod, runtime: PolicyRuntime, decision: DecisionRecord, node: str, annotation: str
    ) -> None:
        try:
            await self._send_binding(entry, runtime, decision, node, annotation)
        finally:
            self.in_flight -= 1
            if self.in_flight < self.concurrency:
                self.room.set()

    async def _send_binding(
        self, entry: QueuedPod, runtime: PolicyRuntime, decision: DecisionRecord, node: str, annotation: str
    ) -> None:
        pod = entry.pod
        # The node may have gone or been cordoned since the decision (the cycle does not wait on the
        # network, but events run in between).
        target = self.cache.nodes.get(node)
        if target is None or _CORDON.filter(pod, target, self.cache.usage_of(node)) is not None:
            self._unreserve(pod)
            self._failed(entry, runtime, f"node {node} was deleted or cordoned before binding")
            return
        started = time.perf_counter()
        try:
            await self.sender.send(
                requests.bind_pod(pod.namespace, pod.name, pod.uid, node, {DECISION_ANNOTATION: annotation})
            )
        except ApiError as error:
            telemetry.bind_duration.labels("error").observe(time.perf_counter() - started)
            self._unreserve(pod)
            if error.status in (404, 409):
                # Deleted, recreated under the same name, or bound by someone else: not ours to retry.
                logger.info("Binding %s to %s dropped: %s", pod.key, node, error)
                return
            self._failed(entry, runtime, f"Binding rejected: {error}")
            return
        except (aiohttp.ClientError, TimeoutError) as error:
            telemetry.bind_duration.labels("error").observe(time.perf_counter() - started)
            self._unreserve(pod)
            self._failed(entry, runtime, f"Binding failed: {error}")
            return
        telemetry.bind_duration.labels("bound").observe(time.perf_counter() - started)
        telemetry.schedule_attempts.labels("scheduled", runtime.name).inc()
        telemetry.e2e_latency.labels(runtime.name).observe(max(0.0, self.queue.clock() - entry.added_at))
        telemetry.decisions_per_node.labels(node).inc()
        runtime.status.record_scheduled(pod.uid, decision)
        self._event(
            _ref(pod), "Normal", "Scheduled", "Binding", f"Successfully assigned {pod.key} to {node}", runtime
        )

    async def _bind_volumes(
        self,
        entry: QueuedPod,
        runtime: PolicyRuntime,
        decision: DecisionRecord,
        node: str,
        annotation: str,
        volumes: VolumePlan,
    ) -> None:
        pod = entry.pod
        try:
            await self.volumes.bind(node, volumes, lambda: pod.uid in self.pending)
        except VolumeBindingFailed as failure:
            self._unreserve(pod)
            if pod.uid in self.pending:
                # As kube reports an error of the binding cycle: the pod is retried after its backoff.
                self.report_unschedulable(pod, failure.message, runtime.scheduler_name, "SchedulerError")
                self._failed(entry, runtime, failure.message)
            return
        self.bind(entry, runtime, decision, node, annotation)

    def _unreserve(self, pod: PodInfo) -> None:
        """A binding cycle failed: the room assumed for `pod` is given back, and the pods parked for
        want of room get another try, as kube-scheduler moves them (AssignedPodDelete) after one."""
        self.cache.forget(pod.uid)
        self.queue.move_all_to_active("binding failed", ClusterEvent.ASSIGNED_POD_DELETED)

    def _failed(self, entry: QueuedPod, runtime: PolicyRuntime, message: str) -> None:
        logger.warning("%s: %s", entry.pod.key, message)
        telemetry.schedule_attempts.labels("error", runtime.name).inc()
        runtime.status.record_error()
        if entry.pod.uid in self.pending:
            self.queue.requeue(self.pending[entry.pod.uid], entry.added_at, entry.attempts)

    # ----- what a pod that fits nowhere is told ------------------------------------------------------

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
        reporter: PolicyRuntime | str,
        related: PodRef | None = None,
    ) -> None:
        controller = reporter if isinstance(reporter, str) else reporter.scheduler_name
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
