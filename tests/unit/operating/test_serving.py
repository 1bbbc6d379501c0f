"""Probes and state gauges: ready means able to serve; Prometheus's health is the policies' business."""

from __future__ import annotations

import dataclasses
import socket
from types import MappingProxyType

from prometheus_client import REGISTRY
from pytest_aiohttp import AiohttpClient

from promsched.api.policies import NodeIdentitySource
from promsched.metrics import NodeIdentity, Snapshot, plan_from_policy
from promsched.metrics.snapshots import PluginSnapshot
from promsched.operating import serving
from promsched.scheduling.schedulers import Scheduler
from support.fake_apis import FakeSender
from support.policies import policy_object, policy_spec, spec_document

UNAME = NodeIdentity(NodeIdentitySource.UNAME_NODENAME)


def closed_port_url() -> str:
    with socket.socket() as sock:  # nobody listens on this port once the socket closes
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def gauge(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_ready_once_the_cluster_is_listed() -> None:
    scheduler = Scheduler(FakeSender())
    assert serving.readiness_problems(scheduler, lambda: True) == [
        "the initial list of nodes and pods has not completed"
    ]
    await scheduler.sync(retry=False)
    assert serving.readiness_problems(scheduler, lambda: True) == []


async def test_a_leader_needs_its_loop_and_a_standby_does_not() -> None:
    scheduler = Scheduler(FakeSender())
    await scheduler.sync(retry=False)
    assert serving.readiness_problems(scheduler, lambda: False) == [
        "this replica leads but its scheduling loop is not running"
    ]
    scheduler.leading.clear()
    assert serving.readiness_problems(scheduler, lambda: False) == []
    assert serving.liveness_problems(lambda: False) == ["the scheduling loop is not running"]


async def test_prometheus_down_leaves_readiness_alone_and_shows_in_conditions_and_gauges() -> None:
    scheduler = Scheduler(FakeSender())
    await scheduler.sync(retry=False)
    url = closed_port_url()
    await scheduler.on_policy("ADDED", policy_object("p", spec_document(prometheus={"url": url})))
    runtime = scheduler.policies["p"]
    assert runtime.refresher is not None
    await runtime.refresher.refresh()
    try:
        assert serving.readiness_problems(scheduler, lambda: True) == []
        ready = next(c for c in runtime.status.conditions if c.type == "Ready")
        assert ready.reason == "PrometheusUnavailable"
        assert f"cpu: cannot reach Prometheus at {url}" in ready.message
        # No plugin ever had an answer: the age counts from when the policy started refreshing.
        serving.record_state(scheduler, now=runtime.refreshing_since + 600)
        assert gauge("promsched_policy_snapshot_age_seconds", policy="p") == 600
        assert gauge("promsched_policy_refresh_interval_seconds", policy="p") == 15
        assert gauge("promsched_policy_ready", policy="p") == 0
    finally:
        await scheduler.close()
    await scheduler.on_policy("DELETED", policy_object("p", spec_document()))
    serving.record_state(scheduler)
    assert gauge("promsched_policy_snapshot_age_seconds", policy="p") is None
    assert gauge("promsched_policy_ready", policy="p") is None


class AnsweredRefresher:
    """A refresher whose latest snapshot had cpu answered at 1000 and memory at 970."""

    def __init__(self) -> None:
        plan = plan_from_policy(policy_spec({"name": "cpu"}, {"name": "memory"}))
        plugins = {
            plugin.name: dataclasses.replace(PluginSnapshot.empty(plugin), refreshed_at=at)
            for plugin, at in zip(plan.plugins, (1000.0, 970.0), strict=True)
        }
        self.latest = Snapshot(plan=plan, taken_at=1000.0, plugins=MappingProxyType(plugins))


async def test_the_snapshot_age_is_that_of_the_plugin_answered_longest_ago() -> None:
    scheduler = Scheduler(FakeSender())
    await scheduler.on_policy("ADDED", policy_object("p", spec_document()))
    runtime = scheduler.policies["p"]
    await scheduler.close()
    runtime.refresher = AnsweredRefresher()  # type: ignore[assignment]
    assert serving.snapshot_age_seconds(runtime, now=1010.0) == 40
    runtime.refresher = None
    assert serving.snapshot_age_seconds(runtime, now=1010.0) is None


async def test_the_leader_gauge_follows_leadership() -> None:
    scheduler = Scheduler(FakeSender())
    serving.record_state(scheduler)
    assert gauge("promsched_leader") == 1
    scheduler.leading.clear()
    serving.record_state(scheduler)
    assert gauge("promsched_leader") == 0


async def test_the_endpoints(aiohttp_client: AiohttpClient) -> None:
    problems: list[str] = ["not yet"]
    scrapes: list[None] = []
    app = serving.application(list, lambda: problems, lambda: scrapes.append(None))
    client = await aiohttp_client(app)
    response = await client.get("/readyz")
    assert (response.status, await response.text()) == (503, "not yet\n")
    problems.clear()
    response = await client.get("/readyz")
    assert (response.status, await response.text()) == (200, "ok\n")
    assert (await client.get("/healthz")).status == 200
    response = await client.get("/metrics")
    assert "promsched_leader" in await response.text()
    assert scrapes == [None]


async def test_healthz_fails_naming_a_background_task_that_keeps_failing(
    aiohttp_client: AiohttpClient,
) -> None:
    failing: list[str] = []
    app = serving.application(
        lambda: serving.liveness_problems(lambda: True, lambda: failing), list, lambda: None
    )
    client = await aiohttp_client(app)
    assert (await client.get("/healthz")).status == 200
    failing.append("rebalancer")
    response = await client.get("/healthz")
    assert (response.status, await response.text()) == (
        503,
        "the background task rebalancer failed 5 times in 300s (see the log for its errors)\n",
    )
