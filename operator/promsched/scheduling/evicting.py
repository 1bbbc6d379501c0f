"""Acting on a preemption: nominate the preemptor, evict its victims, as kube-scheduler's preemption
executor does (asynchronously, so the scheduling loop never waits on it).

The preemptor's room is held in memory at once (the cache's nominations, kube's nominator), then:
status.nominatedNodeName is patched on it; lower-priority pods nominated to the same node lose their
nomination (they may no longer fit there) and, if parked, are retried at once; each victim not already
terminating gets the DisruptionTarget condition (PreemptionByScheduler, kube's message) and is
evicted, and a Preempted event names its preemptor. Unlike kube-scheduler, which deletes its victims,
promsched goes through the Eviction API, so the API server still enforces PodDisruptionBudgets: a
victim it refuses (429) stays, and the preemptor is retried after its backoff, as kube retries a
preemptor whose preemption failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

import aiohttp

from promsched.kube import requests
from promsched.kube.sending import ApiError, SupportsSend
from promsched.scheduling import telemetry
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.nominations import nominated_below
from promsched.scheduling.pods import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER, PodInfo
from promsched.scheduling.preemption_candidates import Candidate
from promsched.scheduling.queues import SchedulingQueue

logger = logging.getLogger(__name__)

TOO_MANY_REQUESTS: Final = 429
NOT_FOUND: Final = 404

ReportPreempted = Callable[[PodInfo, PodInfo, str, str], None]


def disruption_condition(scheduler_name: str, now: str) -> dict[str, str]:
    """The condition kube-scheduler sets on a victim before deleting it."""
    return {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": now,
    }


class Evictor:
    """Sends what a preemption needs; `report_preempted(victim, preemptor, node, scheduler)` tells each
    evicted victim why (the binder's Preempted event)."""

    def __init__(
        self,
        sender: SupportsSend,
        cache: ClusterCache,
        queue: SchedulingQueue,
        *,
        spawn: Callable[[Awaitable[None]], asyncio.Task[None]],
        report_preempted: ReportPreempted,
    ) -> None:
        self.sender = sender
        self.cache = cache
        self.queue = queue
        self.spawn = spawn
        self.report_preempted = report_preempted

    def preempt(self, pod: PodInfo, candidate: Candidate, scheduler_name: str) -> None:
        node = candidate.node
        displaced = nominated_below(pod, self.cache, node)
        self.cache.nominate(pod, node)
        for other in displaced:
            self.cache.nominate(other, "")
        # Their own update (the cleared nomination) is no event the queue acts on: retry them now,
        # as kube's queue does on that update, so they look for another node instead of waiting.
        self.queue.retry(other.uid for other in displaced)
        logger.info(
            "Preempting for %s on %s: %s",
            pod.key,
            node,
            ", ".join(victim.key for victim in candidate.victims),
        )
        telemetry.preemption_victims.observe(len(candidate.victims))
        self.spawn(self._preempt(pod, candidate, scheduler_name, displaced))

    def clear_nomination(self, pod: PodInfo) -> None:
        """No node is worth preempting on any more: the pod holds none (kube clears nominatedNodeName)."""
        self.cache.nominate(pod, "")
        if pod.nominated_node_name:
            self.spawn(self._send_logged(requests.patch_nominated_node(pod.namespace, pod.name, "")))

    async def _preempt(
        self, pod: PodInfo, candidate: Candidate, scheduler_name: str, displaced: list[PodInfo]
    ) -> None:
        await self._send_logged(requests.patch_nominated_node(pod.namespace, pod.name, candidate.node))
        for other in displaced:
            # Retried at once, it may have been nominated elsewhere meanwhile: that patch stands.
            if other.nominated_node_name and other.uid not in self.cache.nominations:
                await self._send_logged(requests.patch_nominated_node(other.namespace, other.name, ""))
        # A victim already terminating needs no second request (kube skips it too).
        victims = [victim for victim in candidate.victims if not victim.deletion_timestamp]
        evicted = await asyncio.gather(
            *(self._evict(victim, pod, candidate.node, scheduler_name) for victim in victims)
        )
        if not all(evicted) and pod.uid in self.queue.entries:
            self.queue.backoff(pod.uid)  # nothing may come to lift it: try again (kube activates it)

    async def _evict(self, victim: PodInfo, preemptor: PodInfo, node: str, scheduler_name: str) -> bool:
        """True when the victim is gone or going."""
        try:
            if victim.disruption_target != PREEMPTION_BY_SCHEDULER:
                condition = disruption_condition(scheduler_name, requests.now_rfc3339())
                await self.sender.send(requests.patch_pod_condition(victim.namespace, victim.name, condition))
            await self.sender.send(requests.evict_pod(victim.namespace, victim.name, victim.uid))
        except ApiError as error:
            if error.status == NOT_FOUND:
                telemetry.preemption_evictions.labels("evicted").inc()
                return True  # already gone
            if error.status == TOO_MANY_REQUESTS:
                telemetry.preemption_evictions.labels("refused").inc()
                logger.warning(
                    "Preempting for %s: the eviction of %s was refused (a PodDisruptionBudget allows no "
                    "disruption now): %s; the preemptor is retried after its backoff",
                    preemptor.key,
                    victim.key,
                    error.message,
                )
            else:
                telemetry.preemption_evictions.labels("failed").inc()
                logger.warning("Preempting for %s: evicting %s failed: %s", preemptor.key, victim.key, error)
            return False
        except (aiohttp.ClientError, TimeoutError) as error:
            telemetry.preemption_evictions.labels("failed").inc()
            logger.warning("Preempting for %s: evicting %s failed: %s", preemptor.key, victim.key, error)
            return False
        telemetry.preemption_evictions.labels("evicted").inc()
        self.cache.preempted.add(victim.uid)
        self.report_preempted(victim, preemptor, node, scheduler_name)
        return True

    async def _send_logged(self, request: requests.Request) -> None:
        """A nomination is information for others: a failure is logged, not retried (the next cycle
        nominates again)."""
        try:
            await self.sender.send(request)
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            logger.warning("%s %s failed: %s", request.method, request.path, error)
