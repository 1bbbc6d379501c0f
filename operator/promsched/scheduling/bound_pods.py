"""Pods on their nodes, followed on a watch of the scheduler's own; Kopf's pod watch has the others.

Most pod events in a cluster are of pods already on a node (their status changing), which the scheduler
only counts. Through Kopf's per-object workers each cost ~0.27 ms of Kopf's own, beside what the intake
does with it (`python -m bench.kopf_micro`), so Kopf's pod watch selects the pods waiting for a node
(`UNBOUND_PODS`) and this follows the bound ones (`BOUND_PODS`), as client-go's reflector does: from the
resourceVersion of the intake's first pod list, resumed from the last version seen (bookmarks keep it
fresh) when the API server ends the stream, or it breaks or falls silent; after 410 Gone it starts anew
from the current state, and the intake lists pods again to learn what was deleted meanwhile.

A binding reaches both watches at one resourceVersion: this one gains the pod (ADDED), and Kopf's loses
it with a DELETED event carrying the pod's last unbound state, as it would for a deletion. The intake
takes that as "waits no more" and leaves what is on the nodes to this watch (`Intake.on_pod`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import aiohttp

from promsched.kube.requests import Request, watch_objects
from promsched.kube.sending import ApiError

logger = logging.getLogger(__name__)

PODS_PATH: Final = "/api/v1/pods"
# Pods that have finished hold nothing on their nodes: kube-scheduler's pod informer leaves them out on
# the server's side (newPodInformer), and so do these watches and the intake's pod lists. A pod that
# finishes leaves its watch as a DELETED event, as it leaves kube-scheduler's informer.
UNFINISHED_PODS: Final = "status.phase!=Succeeded,status.phase!=Failed"
BOUND_PODS: Final = f"spec.nodeName!=,{UNFINISHED_PODS}"
UNBOUND_PODS: Final = f"spec.nodeName=,{UNFINISHED_PODS}"
# client-go's reflector asks for a watch of 5-10 minutes; any length works, this one is in between.
WATCH_SECONDS: Final = 450
RETRY_SECONDS: Final = 1.0


class SupportsWatch(Protocol):
    def watch(
        self, request: Request, inactivity_timeout: float
    ) -> AsyncIterator[tuple[str, Mapping[str, Any]]]: ...


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
        self.watcher = watcher
        self.deliver = deliver
        self.relist = relist
        self.inactivity_timeout = inactivity_timeout
        self.retry_seconds = retry_seconds
        self.sleep = sleep

    async def follow(self, version: str) -> None:
        """Watch from `version` (a pod list's resourceVersion) until cancelled."""
        while True:
            request = watch_objects(PODS_PATH, version, {"fieldSelector": BOUND_PODS}, WATCH_SECONDS)
            try:
                async for event_type, obj in self.watcher.watch(request, self.inactivity_timeout):
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event_type != "BOOKMARK":
                        self.deliver(event_type, obj)
                continue  # the API server ended the watch: resume where it stopped
            except ApiError as error:
                if error.status == 410:
                    logger.info("The watch of bound pods expired (%s); starting it anew", error)
                    version = ""
                    self.relist()
                    continue
                logger.warning("The watch of bound pods failed (retrying): %s", error)
            except (aiohttp.ClientError, TimeoutError) as error:
                logger.warning("The watch of bound pods broke (resuming): %s", error or type(error).__name__)
            await self.sleep(self.retry_seconds)
