"""Rebalancing goes on whatever a cycle meets: an eviction that fails (a dropped connection, a failed
token renewal) or is refused (a PodDisruptionBudget) is a blocked move and the node's next candidate is
tried; a bug in a cycle is logged and counted, and the next cycle runs; pods outside the operator's
namespaces are never candidates."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from prometheus_client import REGISTRY

from promsched.kube.sending import RenewalError
from promsched.metrics import PrometheusClient
from promsched.scheduling.filters import DEFAULT_FILTERS
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.policies.runtimes import PolicyRuntime
from promsched.scheduling.rebalance import rebalancing
from promsched.scheduling.rebalance.plans import RebalancePlan
from promsched.scheduling.rebalance.rebalancing import REFUSED_COOLDOWN_SECONDS
from promsched.scheduling.rebalance.shares import movable
from promsched.scheduling.schedulers import Scheduler
from support.fake_apis import FakeSender
from support.fake_prometheus import FakePrometheus
from support.polling import eventually_async
from support.rebalancing import (
    LOADS,
    BreakingSender,
    Harness,
    answer_cycles,
    hot_and_cool,
    policy,
    workload,
)

EVICT_BIG = "/api/v1/namespaces/ns/pods/big/eviction"
EVICT_SMALL = "/api/v1/namespaces/ns/pods/small/eviction"


@pytest.fixture
async def client(prometheus: FakePrometheus) -> AsyncIterator[PrometheusClient]:
    answer_cycles(prometheus, {"hot": 92.0, "cool": 20.0}, {})
    async with PrometheusClient(prometheus.endpoint()) as client:
        yield client


def big_and_small() -> list[PodInfo]:
    # 800m and 400m of 4 cores: 20 and 10 points; from 95, big alone brings the node to 75.
    return [workload("big", 800), workload("small", 400)]


API_SERVER = aiohttp.client_reqrep.ConnectionKey("api", 443, True, True, None, None, None)


async def cycle_with_big_evictions_failing(
    client: PrometheusClient, error: BaseException
) -> tuple[Harness, PolicyRuntime, RebalancePlan]:
    """One cycle over a hot node holding "big" and "small", where evicting "big" raises `error`."""
    sender = BreakingSender()
    sender.errors["/big/eviction"] = error
    harness = Harness(hot_and_cool(*big_and_small()), client, sender)
    runtime = harness.runtime(policy(), LOADS)
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    return harness, runtime, plan


@pytest.mark.parametrize(
    "error",
    [
        RenewalError("exec plugin: token expired"),
        aiohttp.ClientConnectorError(API_SERVER, ConnectionRefusedError(111, "Connection refused")),
    ],
    ids=["renewal", "connect"],
)
async def test_an_eviction_never_sent_is_blocked_and_the_next_candidate_goes(
    client: PrometheusClient, error: BaseException
) -> None:
    harness, runtime, plan = await cycle_with_big_evictions_failing(client, error)
    assert harness.evictions() == [EVICT_BIG, EVICT_SMALL]
    assert [move.pod.name for move in plan.moves] == ["small"]
    [blocked] = runtime.status.to_status()["rebalance"]["blocked"]
    assert blocked["pod"] == "ns/big"
    assert blocked["reason"].startswith(f"eviction failed: {type(error).__name__}: ")
    assert [pod for pod, _note, _scheduler in harness.announced] == ["ns/small"]


@pytest.mark.parametrize(
    "error",
    [
        aiohttp.ServerDisconnectedError(),
        TimeoutError(),
        ConnectionResetError(104, "Connection reset by peer"),
    ],
    ids=["disconnected", "timeout", "reset"],
)
async def test_an_eviction_lost_on_the_way_is_blocked_and_spends_the_nodes_limit(
    client: PrometheusClient, error: BaseException
) -> None:
    # The API server may have evicted the pod before the answer was lost: maxEvictionsPerNode 1 holds.
    harness, runtime, plan = await cycle_with_big_evictions_failing(client, error)
    assert harness.evictions() == [EVICT_BIG]
    assert plan.moves == ()
    assert harness.announced == []
    reasons = [entry["reason"] for entry in runtime.status.to_status()["rebalance"]["blocked"]]
    assert reasons[0].startswith(f"eviction failed: {type(error).__name__}")
    assert reasons[0].endswith("(the pod may have been evicted)")
    assert reasons[1].endswith("maxEvictionsPerNode reached this cycle")


class BuggyFilter:
    """A filter with a bug, until it is `fixed`."""

    name = "Buggy"

    def __init__(self) -> None:
        self.fixed = False

    def concerns(self, pod: PodInfo) -> bool:
        return True

    def filter(self, pod: PodInfo, node: NodeInfo, usage: object) -> str | None:
        if not self.fixed:
            raise RuntimeError("a bug in a filter")
        return None


def cycle_errors(policy_name: str) -> float:
    labels = {"policy": policy_name}
    return REGISTRY.get_sample_value("promsched_rebalance_cycle_errors_total", labels) or 0.0


async def test_a_bug_in_a_cycle_is_logged_and_counted_and_the_next_cycle_runs(
    client: PrometheusClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(rebalancing, "TICK_SECONDS", 0.01)
    now = [time.time()]
    buggy = BuggyFilter()
    harness = Harness(
        hot_and_cool(*big_and_small()),
        client,
        filters=(buggy, *DEFAULT_FILTERS),
        clock=lambda: now[0],
    )
    runtime = harness.runtime(policy(rebalance={"interval": "10s"}), LOADS)
    harness.rebalancer.runtimes.policies[runtime.name] = runtime
    harness.rebalancer.leading.set()
    before = cycle_errors(runtime.name)
    loop = asyncio.create_task(harness.rebalancer.run())
    try:
        await eventually_async(
            lambda: cycle_errors(runtime.name) == before + 1, what="the failed cycle counted"
        )
        [record] = [r for r in caplog.records if r.name == rebalancing.__name__ and r.exc_info]
        assert record.levelno == logging.ERROR
        assert record.getMessage() == "Rebalance of policy p failed unexpectedly"
        buggy.fixed = True
        now[0] += 10
        await eventually_async(lambda: harness.evictions() == [EVICT_BIG], what="the next cycle's eviction")
        assert not loop.done()
    finally:
        loop.cancel()
    assert cycle_errors(runtime.name) == before + 1


async def test_a_pod_its_budget_protects_leaves_the_nodes_eviction_to_the_next_candidate(
    client: PrometheusClient,
) -> None:
    # db is the largest, so the first candidate; its PodDisruptionBudget refuses every eviction.
    pods = [workload("db", 1000), workload("web-a", 600), workload("web-b", 600)]
    harness = Harness(hot_and_cool(*pods), client)
    harness.sender.fail["/db/eviction"] = 429
    runtime = harness.runtime(policy(), LOADS)
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    assert [path.split("/")[-2] for path in harness.evictions()] == ["db", "web-a"]
    assert [move.pod.name for move in plan.moves] == ["web-a"]
    blocked = runtime.status.to_status()["rebalance"]["blocked"]
    assert [(entry["pod"], entry["reason"]) for entry in blocked] == [
        ("ns/db", "eviction refused by a PodDisruptionBudget: refused"),
        ("ns/web-b", "hot cpu 92% for 5m > 85%; maxEvictionsPerNode reached this cycle"),
    ]
    assert runtime.status.to_status()["rebalance"]["evictions"] == 1


async def test_a_refused_pod_is_tried_after_the_others_until_its_cooldown_ends(
    client: PrometheusClient,
) -> None:
    now = [time.time()]
    pods = [workload("db", 1000), *(workload(f"web-{name}", 600) for name in "abc")]
    harness = Harness(hot_and_cool(*pods), client, clock=lambda: now[0])
    harness.sender.fail["/db/eviction"] = 429

    async def cycle_at(moment: float) -> list[str]:
        """The pods the cycle at `moment` asked to evict; those evicted leave the node."""
        now[0], sent = moment, len(harness.sender.sent)
        await harness.rebalancer.cycle(harness.runtime(policy(), LOADS, at=moment))
        asked = [path.split("/")[-2] for path in harness.evictions()[sent:]]
        for name in asked:
            if name != "db" or "/db/eviction" not in harness.sender.fail:
                harness.cache.remove_pod(next(pod.uid for pod in pods if pod.name == name))
        return asked

    assert await cycle_at(now[0]) == ["db", "web-a"]
    del harness.sender.fail["/db/eviction"]  # the budget would allow a disruption now
    # Refused a minute ago: the others first, though db is the largest.
    assert await cycle_at(now[0] + 60) == ["web-b"]
    assert await cycle_at(now[0] + REFUSED_COOLDOWN_SECONDS) == ["db"]


async def test_pods_outside_the_operators_namespaces_are_never_candidates(client: PrometheusClient) -> None:
    pods = [workload("big", 800, namespace="elsewhere"), workload("small", 400)]
    harness = Harness(hot_and_cool(*pods), client, namespaces=frozenset({"ns"}))
    runtime = harness.runtime(policy(), LOADS)
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    assert harness.evictions() == [EVICT_SMALL]
    assert "ns/elsewhere" not in str(runtime.status.to_status()["rebalance"])


def test_a_pod_outside_the_operators_namespaces_may_not_move() -> None:
    pod = workload("w", 100, namespace="elsewhere")
    assert movable(pod, policy().spec, None, time.time(), {}, frozenset({"ns"})) == (
        "its namespace is not among the operator's --namespaces"
    )
    assert movable(pod, policy().spec, None, time.time(), {}, None) is None


def test_the_schedulers_namespaces_reach_its_rebalancer() -> None:
    scheduler = Scheduler(FakeSender(), namespaces=frozenset({"ns"}))
    assert scheduler.rebalancer.namespaces == frozenset({"ns"})
