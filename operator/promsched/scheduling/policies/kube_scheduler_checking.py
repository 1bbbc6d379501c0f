"""Whether kube-scheduler runs, read from its leader-election Lease (kube-system/kube-scheduler).

A policy in Enforce mode that claims `default-scheduler` while kube-scheduler runs would race it for
every pod: both bind, one of them loses with a conflict, and where a pod lands depends on which was
faster. Such a policy is held (Ready=False, Conflict) for as long as the Lease is held and renewed;
Shadow mode is the way to score kube-scheduler's pods.

kube-scheduler renews its Lease every 2 s (leaseDurationSeconds 15 by default). It counts as running
while the Lease has a holder and its renewTime is within leaseDurationSeconds, plus CLOCK_SKEW for the
difference between the API server's clock and ours. A released Lease (no holder) or none at all means
it is not running (managed control planes run it with leader election, so the Lease is there). When
the Lease cannot be read, the last answer stands; before there is one, the policy is held: binding
alongside a scheduler that may be running is what this check prevents.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from promsched.kube import requests
from promsched.kube.sending import ApiError, SupportsSend

logger = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "kube-scheduler"
CHECK_INTERVAL = 10.0
CLOCK_SKEW = 30.0
_DEFAULT_LEASE_SECONDS = 15.0
_ADVICE = (
    "two schedulers would bind the same pods. Use mode: Shadow to score kube-scheduler's pods, or give "
    "this policy a schedulerName of its own"
)


def _parse_time(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def lease_holder(lease: Mapping[str, Any], now: datetime.datetime) -> str:
    """The identity holding `lease` and renewing it in time at `now`; "" when nobody does."""
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    renewed = _parse_time(str(spec.get("renewTime") or ""))
    if not holder or renewed is None:
        return ""
    duration = float(spec.get("leaseDurationSeconds") or _DEFAULT_LEASE_SECONDS)
    if (now - renewed).total_seconds() > duration + CLOCK_SKEW:
        return ""
    return holder


@dataclass
class KubeSchedulerCheck:
    """The latest answer to "does kube-scheduler run?": `running` (None until asked) and `reason`."""

    sender: SupportsSend
    interval: float = CHECK_INTERVAL
    running: bool | None = None
    reason: str = "whether kube-scheduler runs is not known yet"  # why a policy is held while it does

    async def check(self) -> bool:
        """Read the Lease now; True while kube-scheduler runs or, never known, may run."""
        try:
            lease = await self.sender.send(requests.get_lease(LEASE_NAMESPACE, LEASE_NAME))
        except ApiError as error:
            if error.status == 404:
                return self._set(False, "")
            return self._unknown(
                f"{error}; grant get on Lease {LEASE_NAMESPACE}/{LEASE_NAME} (the chart does)"
            )
        except (aiohttp.ClientError, TimeoutError) as error:
            return self._unknown(f"{type(error).__name__}: {error}")
        holder = lease_holder(lease, datetime.datetime.now(datetime.UTC))
        if not holder:
            return self._set(False, "")
        return self._set(
            True,
            f"kube-scheduler runs (Lease {LEASE_NAMESPACE}/{LEASE_NAME} is held by {holder} and "
            f"renewed): {_ADVICE}",
        )

    def _unknown(self, problem: str) -> bool:
        logger.warning("Cannot tell whether kube-scheduler runs: %s", problem)
        if self.running is not None:
            return self.running
        return self._set(True, f"cannot tell whether kube-scheduler runs ({problem}), and {_ADVICE}")

    def _set(self, running: bool, reason: str) -> bool:
        self.running, self.reason = running, reason
        return running

    async def run(self, wanted: Callable[[], bool], changed: Callable[[], None]) -> None:
        """Check every `interval` while `wanted()` (a policy needs the answer); `changed()` on a change."""
        while True:
            await asyncio.sleep(self.interval)
            if not wanted():
                continue
            before = (self.running, self.reason)
            await self.check()
            if (self.running, self.reason) != before:
                changed()
