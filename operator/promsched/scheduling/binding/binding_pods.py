"""The binding cycle: a pod the scheduling cycle assumed on a node is bound there.

A pod whose claims need volumes bound first has them bound before (see `prebinding`), without taking a
slot meanwhile. A binding is sent at once, at most `concurrency` of them in flight: the scheduling loop
waits for room (`room`) before it takes the next pod, so a burst waits in the queue, not as decisions
held here. What a binding tells the pod (its Scheduled event, or why it failed) goes through the
reporter, behind the bindings (see `reporting_pods`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
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
from promsched.scheduling.intake.following import Intake
from promsched.scheduling.policies.recording import DecisionRecord
from promsched.scheduling.policies.runtimes import PolicyRuntime
from promsched.scheduling.queues import QueuedPod
from promsched.scheduling.reporting.reporting_pods import PodReporter

logger = logging.getLogger(__name__)

# Bindings (each with its Scheduled event) in flight: each holds a connection to the API server.
BIND_CONCURRENCY: Final = 32
_CORDON: Final = NodeUnschedulable()


@dataclass(frozen=True, slots=True)
class Assumed:
    """A pod the scheduling cycle assumed on `node`, as the binder gets it: its queue entry, the policy
    that placed it, the decision recorded and the annotation that carries it, and the `volumes` its
    claims need bound there first."""

    entry: QueuedPod
    runtime: PolicyRuntime
    decision: DecisionRecord
    node: str
    annotation: str
    volumes: VolumePlan | None = None


class Binder:
    """Binds assumed pods; `reporter` tells each what its binding came to. A pod whose binding fails goes
    back to the `intake`, which holds the pending pods and feeds the queue. `clock` is the queue's, by
    which a pod's wait is timed."""

    def __init__(
        self,
        sender: SupportsSend,
        cache: ClusterCache,
        intake: Intake,
        reporter: PodReporter,
        *,
        spawn: Callable[[Awaitable[None]], asyncio.Task[None]],
        concurrency: int = BIND_CONCURRENCY,
        bind_timeout: float = BIND_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sender = sender
        self.cache = cache
        self.intake = intake
        self.reporter = reporter
        self.clock = clock
        self.spawn = spawn
        self.concurrency = concurrency
        self.in_flight = 0
        self.room = asyncio.Event()
        self.room.set()
        self.volumes = VolumeBinder(sender, cache, timeout=bind_timeout)

    def bind(self, assumed: Assumed) -> None:
        """Bind the assumed pod in the background; the loop may go on unless the cap is reached. Its
        `volumes` are assumed at once and bound first."""
        if assumed.volumes:
            self.volumes.assume(assumed.volumes, assumed.node)
            self.spawn(self._bind_volumes(assumed, assumed.volumes))
            return
        self.in_flight += 1
        if self.in_flight >= self.concurrency:
            self.room.clear()
        self.spawn(self._bind(assumed))

    async def _bind(self, assumed: Assumed) -> None:
        try:
            await self._send_binding(assumed)
        finally:
            self.in_flight -= 1
            if self.in_flight < self.concurrency:
                self.room.set()

    async def _send_binding(self, assumed: Assumed) -> None:
        pod, node, runtime = assumed.entry.pod, assumed.node, assumed.runtime
        # The node may have gone or been cordoned since the decision (the cycle does not wait on the
        # network, but events run in between).
        target = self.cache.nodes.get(node)
        if target is None or _CORDON.filter(pod, target, self.cache.usage_of(node)) is not None:
            self.intake.unreserve(pod.uid)
            self._failed(assumed, f"node {node} was deleted or cordoned before binding")
            return
        started = time.perf_counter()
        try:
            await self.sender.send(
                requests.bind_pod(
                    pod.namespace, pod.name, pod.uid, node, {DECISION_ANNOTATION: assumed.annotation}
                )
            )
        except ApiError as error:
            telemetry.bind_duration.labels("error").observe(time.perf_counter() - started)
            self.intake.unreserve(pod.uid)
            if error.status in (404, 409):
                # Deleted, recreated under the same name, or bound by someone else: not ours to retry.
                logger.info("Binding %s to %s dropped: %s", pod.key, node, error)
                return
            self._failed(assumed, f"Binding rejected: {error}")
            return
        except (aiohttp.ClientError, TimeoutError) as error:
            telemetry.bind_duration.labels("error").observe(time.perf_counter() - started)
            self.intake.unreserve(pod.uid)
            self._failed(assumed, f"Binding failed: {error}")
            return
        telemetry.bind_duration.labels("bound").observe(time.perf_counter() - started)
        telemetry.schedule_attempts.labels("scheduled", runtime.name).inc()
        telemetry.e2e_latency.labels(runtime.name).observe(max(0.0, self.clock() - assumed.entry.added_at))
        telemetry.decisions_per_node.labels(node).inc()
        runtime.status.record_scheduled(pod.uid, assumed.decision)
        self.reporter.report_scheduled(pod, node, runtime.scheduler_name)

    async def _bind_volumes(self, assumed: Assumed, volumes: VolumePlan) -> None:
        pod = assumed.entry.pod
        try:
            await self.volumes.bind(assumed.node, volumes, lambda: pod.uid in self.intake.pending)
        except VolumeBindingFailed as failure:
            self.intake.unreserve(pod.uid)
            if pod.uid in self.intake.pending:
                # As kube reports an error of the binding cycle: the pod is retried after its backoff.
                scheduler_name = assumed.runtime.scheduler_name
                self.reporter.report_unschedulable(pod, failure.message, scheduler_name, "SchedulerError")
                self._failed(assumed, failure.message)
            return
        self.bind(replace(assumed, volumes=None))

    def _failed(self, assumed: Assumed, message: str) -> None:
        entry, runtime = assumed.entry, assumed.runtime
        logger.warning("%s: %s", entry.pod.key, message)
        telemetry.schedule_attempts.labels("error", runtime.name).inc()
        runtime.status.record_error()
        self.intake.retry(entry)
