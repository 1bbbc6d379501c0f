"""Acting on a preemption: nominate the preemptor, evict its victims, as kube-scheduler's preemption
executor does (asynchronously, so the scheduling loop never waits on it).

The preemptor's room is held in memory at once (the cache's nominations, kube's nominator), then:
status.nominatedNodeName is patched on it, unless it already holds that node (kube skips an unchanged
nomination); lower-priority pods nominated to the same node lose their nomination (they may no longer
fit there) and, if parked, are retried at once; each victim not already terminating gets the
DisruptionTarget condition (PreemptionByScheduler, kube's message) and is evicted, and a Preempted
event names its preemptor.

Unlike kube-scheduler, which deletes its victims, promsched goes through the Eviction API, so the API
server still enforces PodDisruptionBudgets: a victim it refuses (429) stays, and the preemptor is
retried after its backoff, as kube retries a preemptor whose preemption failed. A refused victim's
condition is taken back, since no disruption follows (a Job's podFailurePolicy reads it), and while
the budgets covering it are as they were at the refusal, no victim of a preemption that needs it is
asked again: a preemptor retried every backoff sends nothing until the disruption controller allows a
disruption.
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
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.nominations import nominated_below
from promsched.scheduling.cycle.preemption_candidates import Candidate
from promsched.scheduling.objects.disruption_budgets import DisruptionBudget
from promsched.scheduling.objects.pods import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER, PodInfo
from promsched.scheduling.queues import SchedulingQueue

logger = logging.getLogger(__name__)

TOO_MANY_REQUESTS: Final = 429
NOT_FOUND: Final = 404
# The mark is taken back after an answer below this: a refusal, the request rejected before any write.
# A 5xx or no answer may hide an eviction under way; its mark stays (kube keeps it after a failed
# delete too), and the preemptor's next try evicts again.
SERVER_ERROR: Final = 500

ReportPreempted = Callable[[PodInfo, PodInfo, str, str], None]


def _unmarked() -> dict[str, str]:
    """A strategic merge patch's element removing the DisruptionTarget condition."""
    return {"type": DISRUPTION_TARGET, "$patch": "delete"}


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
    evicted victim why (the reporter's Preempted event)."""

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
        # victim uid -> its node and the budgets covering it when the Eviction API refused it for them
        self.refused: dict[str, tuple[str, tuple[DisruptionBudget, ...]]] = {}

    def preempt(self, pod: PodInfo, candidate: Candidate, scheduler_name: str) -> None:
        node = candidate.node
        for uid, (on, _) in list(self.refused.items()):
            if uid not in self.cache.node_pods.get(on, {}):
                del self.refused[uid]  # gone: nothing to remember it for
        displaced = nominated_below(pod, self.cache, node)
        self.cache.nominate(pod, node)
        for other in displaced:
            self.cache.nominate(other, "")
        # Their own update (the cleared nomination) is no event the queue acts on: retry them now,
        # as kube's queue does on that update, so they look for another node instead of waiting.
        self.queue.retry(other.uid for other in displaced)
        # A victim already terminating needs no second request (kube skips it too).
        victims = [victim for victim in candidate.victims if not victim.deletion_timestamp]
        held = [victim.key for victim in victims if self._still_refused(victim)]
        if held:
            # Evicting the others would disrupt them for a preemption that cannot complete.
            logger.debug(
                "Preempting for %s on %s: held back, %s still refused under unchanged budgets",
                pod.key,
                node,
                ", ".join(held),
            )
            victims = []
        else:
            logger.info(
                "Preempting for %s on %s: %s",
                pod.key,
                node,
                ", ".join(victim.key for victim in candidate.victims),
            )
        telemetry.preemption_victims.observe(len(candidate.victims))
        self.spawn(self._preempt(pod, node, scheduler_name, displaced, victims, bool(held)))

    def clear_nomination(self, pod: PodInfo) -> None:
        """No node is worth preempting on any more: the pod holds none (kube clears nominatedNodeName)."""
        self.cache.nominate(pod, "")
        if pod.nominated_node_name:
            self.spawn(self._send_logged(requests.patch_nominated_node(pod.namespace, pod.name, "")))

    async def _preempt(
        self,
        pod: PodInfo,
        node: str,
        scheduler_name: str,
        displaced: list[PodInfo],
        victims: list[PodInfo],
        held: bool,
    ) -> None:
        if pod.nominated_node_name != node:
            await self._send_logged(requests.patch_nominated_node(pod.namespace, pod.name, node))
        for other in displaced:
            # Retried at once, it may have been nominated elsewhere meanwhile: that patch stands.
            if other.nominated_node_name and other.uid not in self.cache.nominations:
                await self._send_logged(requests.patch_nominated_node(other.namespace, other.name, ""))
        evicted = await asyncio.gather(
            *(self._evict(victim, pod, node, scheduler_name) for victim in victims)
        )
        if (held or not all(evicted)) and pod.uid in self.queue.entries:
            self.queue.backoff(pod.uid)  # nothing may come to lift it: try again (kube activates it)

    def _budgets_of(self, victim: PodInfo) -> tuple[DisruptionBudget, ...]:
        return tuple(budget for budget in self.cache.budgets.values() if budget.covers(victim))

    def _still_refused(self, victim: PodInfo) -> bool:
        """Whether the Eviction API refused `victim` under the budgets that cover it now."""
        refused = self.refused.get(victim.uid)
        return refused is not None and refused[1] == self._budgets_of(victim)

    async def _evict(self, victim: PodInfo, preemptor: PodInfo, node: str, scheduler_name: str) -> bool:
        """True when the victim is gone or going."""
        marked = False
        try:
            if victim.disruption_target != PREEMPTION_BY_SCHEDULER:
                condition = disruption_condition(scheduler_name, requests.now_rfc3339())
                await self.sender.send(requests.patch_pod_condition(victim.namespace, victim.name, condition))
                marked = True
            await self.sender.send(requests.evict_pod(victim.namespace, victim.name, victim.uid))
        except ApiError as error:
            if error.status == NOT_FOUND:
                telemetry.preemption_evictions.labels("evicted").inc()
                return True  # already gone
            if error.status == TOO_MANY_REQUESTS:
                telemetry.preemption_evictions.labels("refused").inc()
                self._remember_refusal(victim, node)
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
            if marked and error.status < SERVER_ERROR:
                await self._send_logged(
                    requests.patch_pod_condition(victim.namespace, victim.name, _unmarked())
                )
            return False
        except (aiohttp.ClientError, TimeoutError) as error:
            telemetry.preemption_evictions.labels("failed").inc()
            logger.warning("Preempting for %s: evicting %s failed: %s", preemptor.key, victim.key, error)
            return False
        telemetry.preemption_evictions.labels("evicted").inc()
        self.refused.pop(victim.uid, None)
        self.cache.preempted.add(victim.uid)
        self.report_preempted(victim, preemptor, node, scheduler_name)
        return True

    def _remember_refusal(self, victim: PodInfo, node: str) -> None:
        """Hold the victim back while the budgets that explain the refusal stay as they are; a refusal
        they do not explain (none covering it has no disruption left) is asked again next time."""
        budgets = self._budgets_of(victim)
        if any(budget.disruptions_allowed <= 0 for budget in budgets):
            self.refused[victim.uid] = (node, budgets)

    async def _send_logged(self, request: requests.Request) -> None:
        """A nomination or a mark taken back is information for others: a failure is logged, not
        retried (the next cycle nominates again)."""
        try:
            await self.sender.send(request)
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            logger.warning("%s %s failed: %s", request.method, request.path, error)
