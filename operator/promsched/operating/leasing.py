"""Leader election through a coordination.k8s.io Lease of promsched's own name.

Only the holder schedules. A lease counts as expired when its record has not changed for
`lease_seconds` as observed by this replica's own clock (not the holder's timestamps), as client-go
does, so clock skew between replicas cannot make two leaders. The holder steps down when it has not
renewed within `lease_seconds - renew_margin`, before any standby may take over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from promsched.kube import requests
from promsched.kube.sending import ApiError, SupportsSend

logger = logging.getLogger(__name__)


@dataclass
class LeaseElector:
    sender: SupportsSend
    namespace: str
    name: str
    identity: str
    on_change: Callable[[bool], None]
    lease_seconds: float = 10.0
    retry_seconds: float = 2.0
    renew_margin: float = 3.0
    clock: Callable[[], float] = time.monotonic
    leading: bool = False
    _last_renewed: float = 0.0
    _observed: tuple[str, float] = field(default=("", 0.0))  # (resourceVersion, when we saw it change)

    def _spec(self, transitions: int, acquired: str | None = None) -> dict[str, Any]:
        stamp = requests.now_rfc3339(micro=True)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_seconds),
            "acquireTime": acquired or stamp,
            "renewTime": stamp,
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        try:
            lease = await self.sender.send(requests.get_lease(self.namespace, self.name))
        except ApiError as error:
            if error.status != 404:
                raise
            await self.sender.send(requests.create_lease(self.namespace, self.name, self._spec(0)))
            return True
        spec = lease.get("spec") or {}
        version = lease["metadata"]["resourceVersion"]
        now = self.clock()
        if version != self._observed[0]:
            self._observed = (version, now)
        holder = spec.get("holderIdentity") or ""
        expired = now - self._observed[1] > float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.identity)
        acquired = spec.get("acquireTime") if holder == self.identity else None
        updated = await self.sender.send(
            requests.replace_lease(self.namespace, self.name, version, self._spec(transitions, acquired))
        )
        self._observed = (updated["metadata"]["resourceVersion"], self.clock())
        return True

    def _set(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            logger.info("%s the lease %s/%s", "Acquired" if leading else "Lost", self.namespace, self.name)
            self.on_change(leading)

    async def run(self) -> None:
        try:
            while True:
                try:
                    acquired = await self.try_acquire_or_renew()
                except ApiError as error:
                    acquired = False
                    if error.status != 409:  # 409: another replica wrote first; just retry
                        logger.warning("Lease %s/%s: %s", self.namespace, self.name, error)
                except (aiohttp.ClientError, TimeoutError) as error:
                    acquired = False
                    logger.warning("Lease %s/%s: %s", self.namespace, self.name, error)
                if acquired:
                    self._last_renewed = self.clock()
                    self._set(True)
                elif (
                    not self.leading
                    or self.clock() - self._last_renewed > self.lease_seconds - self.renew_margin
                ):
                    self._set(False)
                await asyncio.sleep(self.retry_seconds)
        finally:
            await self.release()

    async def release(self) -> None:
        """Give the lease up on shutdown so a standby takes over at once, not after it expires."""
        if not self.leading:
            return
        self._set(False)
        try:
            lease = await self.sender.send(requests.get_lease(self.namespace, self.name))
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = dict(lease["spec"], holderIdentity="", leaseDurationSeconds=1)
                await self.sender.send(
                    requests.replace_lease(
                        self.namespace, self.name, lease["metadata"]["resourceVersion"], spec
                    )
                )
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            logger.warning("Releasing the lease failed: %s", error)
