"""Pods on their nodes, followed on a watch of the scheduler's own; Kopf's pod watch has the others.

Most pod events in a cluster are of pods already on a node (their status changing), which the scheduler
only counts. Through Kopf's per-object workers each cost ~0.27 ms of Kopf's own, beside what the intake
does with it (`python -m bench.kopf_micro`), so Kopf's pod watch selects the pods waiting for a node
(`UNBOUND_PODS`) and this follows the bound ones (`BOUND_PODS`) with `kube.reflecting`: from the
resourceVersion of the intake's first pod list, resumed from the last version seen (bookmarks keep it
fresh) when the API server ends the stream, or it breaks or falls silent; after 410 Gone it starts anew
from the current state, and the intake lists pods again to learn what was deleted meanwhile.

A binding reaches both watches at one resourceVersion: this one gains the pod (ADDED), and Kopf's loses
it with a DELETED event carrying the pod's last unbound state, as it would for a deletion. The intake
takes that as "waits no more" and leaves what is on the nodes to this watch (`Intake.on_event`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from promsched.kube.reflecting import RETRY_SECONDS, Reflector, SupportsWatch

logger = logging.getLogger(__name__)

PODS_PATH: Final = "/api/v1/pods"
# Pods that have finished hold nothing on their nodes: kube-scheduler's pod informer leaves them out on
# the server's side (newPodInformer), and so do these watches and the intake's pod lists. A pod that
# finishes leaves its watch as a DELETED event, as it leaves kube-scheduler's informer.
UNFINISHED_PODS: Final = "status.phase!=Succeeded,status.phase!=Failed"
BOUND_PODS: Final = f"spec.nodeName!=,{UNFINISHED_PODS}"
UNBOUND_PODS: Final = f"spec.nodeName=,{UNFINISHED_PODS}"


class BoundPods:
    """Hands every event of a bound, unfinished pod to `deliver`, and asks `relist` for a list of pods
    when the watch could not be resumed."""

    def __init__(
        self,
        watcher: SupportsWatch,
        deliver: Callable[[str, Mapping[str, Any]], None],
        relist: Callable[[], None],
        *,
        inactivity_timeout: float,
        retry_seconds: float = RETRY_SECONDS,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.relist = relist
        self.reflector = Reflector(
            watcher,
            PODS_PATH,
            BOUND_PODS,
            deliver,
            self._expired,
            what="bound pods",
            inactivity_timeout=inactivity_timeout,
            retry_seconds=retry_seconds,
            sleep=sleep,
            logger=logger,
        )

    async def follow(self, version: str | None) -> None:
        """Watch from `version` (a pod list's resourceVersion; None: list the pods again, then watch from
        the current state) until cancelled."""
        await self.reflector.follow(version)

    async def _expired(self) -> str:
        # The intake lists pods on its own tasks; the watch starts from the current state meanwhile.
        self.relist()
        return ""
