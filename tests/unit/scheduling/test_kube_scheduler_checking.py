"""Two schedulers for one name: an Enforce policy for default-scheduler is held while kube-scheduler runs."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from promsched.kube.requests import lease_path
from promsched.scheduling.intake.kinds import NODES, PODS
from promsched.scheduling.policies.kube_scheduler_checking import (
    CLOCK_SKEW,
    LEASE_NAME,
    LEASE_NAMESPACE,
    KubeSchedulerCheck,
    lease_holder,
)
from promsched.scheduling.schedulers import Scheduler
from support.fake_apis import FakeApiServer
from support.objects import node_object, pod_object
from support.policies import policy_object, spec_document
from support.polling import eventually_async

NOW = datetime.datetime(2026, 3, 1, 12, 0, 0, tzinfo=datetime.UTC)
LEASE = lease_path(LEASE_NAMESPACE, LEASE_NAME)


def lease(holder: str = "master-0_1a2b", renewed_ago: float = 1.0, duration: int = 15) -> dict[str, Any]:
    renewed = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=renewed_ago)
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }


def renewed_at(seconds_ago: float, holder: str = "master-0_1a2b") -> dict[str, Any]:
    renew_time = (NOW - datetime.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renew_time}}


@pytest.mark.parametrize(
    ("lease_object", "holder"),
    [
        (renewed_at(2), "master-0_1a2b"),
        (renewed_at(15 + CLOCK_SKEW - 1), "master-0_1a2b"),  # within the duration, allowing for skew
        (renewed_at(15 + CLOCK_SKEW + 1), ""),  # kube-scheduler stopped without releasing it
        (renewed_at(2, holder=""), ""),  # released on shutdown
        ({"spec": {"holderIdentity": "master-0"}}, ""),  # never renewed
        ({}, ""),
    ],
)
def test_a_lease_is_held_while_renewed_in_time(lease_object: dict[str, Any], holder: str) -> None:
    assert lease_holder(lease_object, NOW) == holder


async def test_kube_scheduler_runs_while_its_lease_is_renewed() -> None:
    api = FakeApiServer()
    check = KubeSchedulerCheck(api)
    assert await check.check() is False  # no Lease: no kube-scheduler
    api.store(LEASE, lease())
    assert await check.check() is True
    assert check.reason.startswith(
        "kube-scheduler runs (Lease kube-system/kube-scheduler is held by master-0_1a2b and renewed): "
        "two schedulers would bind the same pods. Use mode: Shadow"
    )
    api.store(LEASE, lease(renewed_ago=300))
    assert await check.check() is False


async def test_a_lease_that_cannot_be_read_holds_until_known_then_keeps_the_last_answer() -> None:
    api = FakeApiServer()
    api.fail[LEASE] = 403
    check = KubeSchedulerCheck(api)
    assert await check.check() is True
    assert "cannot tell whether kube-scheduler runs" in check.reason
    assert "grant get on Lease kube-system/kube-scheduler (the chart does)" in check.reason
    del api.fail[LEASE]
    assert await check.check() is False
    api.fail[LEASE] = 500
    assert await check.check() is False


async def test_the_check_repeats_only_while_wanted_and_reports_changes() -> None:
    api = FakeApiServer()
    check = KubeSchedulerCheck(api, interval=0.01)
    asked: list[bool] = []
    changes: list[bool | None] = []

    def wanted() -> bool:
        asked.append(len(asked) >= 3)  # not wanted the first three times
        return asked[-1]

    task = asyncio.create_task(check.run(wanted, lambda: changes.append(check.running)))
    try:
        await eventually_async(lambda: changes == [False], what="unknown became not running")
        assert api.paths("GET") == [LEASE] * (len(asked) - 3)
        api.store(LEASE, lease())
        await eventually_async(lambda: changes == [False, True], what="kube-scheduler seen running")
    finally:
        task.cancel()


def conditions(scheduler: Scheduler, policy: str) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status.value, c.reason) for c in scheduler.policies[policy].status.conditions}


async def test_an_enforce_policy_for_default_scheduler_is_held_while_kube_scheduler_runs() -> None:
    api = FakeApiServer()
    api.store(LEASE, lease())
    scheduler = Scheduler(api)
    try:
        scheduler.intake.on_event(NODES, "ADDED", node_object("node-0"))
        spec = spec_document(schedulerName="default-scheduler")
        await scheduler.on_policy("ADDED", policy_object("takeover", spec))
        scheduler.intake.on_event(PODS, "ADDED", pod_object("web", schedulerName="default-scheduler"))

        assert conditions(scheduler, "takeover")["Ready"] == ("False", "Conflict")
        assert conditions(scheduler, "takeover")["Conflict"] == ("True", "KubeSchedulerRunning")
        assert "default-scheduler" not in scheduler.owners
        assert len(scheduler.queue) == 0  # nothing to bind: kube-scheduler places the pod

        api.store(LEASE, lease(holder=""))  # kube-scheduler stopped and released its Lease
        await scheduler.kube_scheduler.check()
        scheduler._kube_scheduler_changed()
        assert conditions(scheduler, "takeover")["Conflict"] == ("False", "NoConflict")
        assert scheduler.owners["default-scheduler"].name == "takeover"
        assert len(scheduler.queue) == 1
    finally:
        await scheduler.close()


async def test_shadow_mode_watches_kube_schedulers_pods_without_asking() -> None:
    api = FakeApiServer()
    api.store(LEASE, lease())
    scheduler = Scheduler(api)
    try:
        spec = spec_document(schedulerName="default-scheduler", mode="Shadow")
        await scheduler.on_policy("ADDED", policy_object("watch", spec))
        assert conditions(scheduler, "watch")["Conflict"] == ("False", "NoConflict")
        assert scheduler.owners["default-scheduler"].name == "watch"
        assert LEASE not in api.paths("GET")
    finally:
        await scheduler.close()
