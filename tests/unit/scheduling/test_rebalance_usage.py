"""A running pod's share of a hot node is what it was observed to use over sustainedFor, where its
cAdvisor series exist, and the policy's estimate only where they do not; the move's reason (its Event
and the status) says which. The hot nodes' movable pods are asked for together: one query per resource
per cycle."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from promsched.metrics import PrometheusClient, plan_from_policy
from promsched.metrics.usage_querying import PodUsage, ResourceUsage
from promsched.scheduling.cycle.estimating import Estimates
from promsched.scheduling.rebalance.plans import Share
from promsched.scheduling.rebalance.shares import PodShares
from support.fake_prometheus import FakePrometheus, RecordedRequest
from support.rebalancing import (
    CPU_USAGE_QUERY_START,
    LOADS,
    MEMORY_USAGE_QUERY_START,
    Harness,
    answer_cycles,
    hot_and_cool,
    policy,
    workload,
)
from support.snapshots import snapshot_of

SUSTAINED = {"hot": 92.0, "cool": 20.0}


@pytest.fixture
async def client(prometheus: FakePrometheus) -> AsyncIterator[PrometheusClient]:
    async with PrometheusClient(prometheus.endpoint()) as client:
        yield client


def usage_queries(prometheus: FakePrometheus) -> list[str]:
    return [
        query
        for query in prometheus.queries()
        if query.startswith((CPU_USAGE_QUERY_START, MEMORY_USAGE_QUERY_START))
    ]


async def test_the_pod_that_uses_the_most_moves_first_though_requests_are_equal(
    prometheus: FakePrometheus, client: PrometheusClient
) -> None:
    # Both request 800m (20 points); web-b uses 1.6 cores (40 points), web-a 100m.
    answer_cycles(prometheus, SUSTAINED, {"web-a": 0.1, "web-b": 1.6})
    harness = Harness(hot_and_cool(workload("web-a", 800), workload("web-b", 800)), client)
    runtime = harness.runtime(policy(), LOADS)
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    assert harness.evictions() == ["/api/v1/namespaces/ns/pods/web-b/eviction"]
    # 20 + 40 at the destination: its observed share, not its request, lands there.
    reason = (
        "hot cpu 92% for 5m > 85%; its share: cpu 40% (observed over 5m); "
        "expected destination cool at cpu 60%"
    )
    assert [move.reason for move in plan.moves] == [reason]
    assert harness.announced == [("ns/web-b", f"Evicted by promsched: {reason}", "promsched")]
    assert runtime.status.to_status()["rebalance"]["moves"][0]["reason"] == reason


async def test_a_pod_without_usage_series_is_counted_at_its_estimate(
    prometheus: FakePrometheus, client: PrometheusClient
) -> None:
    # web-a shows 100m; web-b has no series: its estimate (its 800m request, 20 points) stands in.
    answer_cycles(prometheus, SUSTAINED, {"web-a": 0.1})
    harness = Harness(hot_and_cool(workload("web-a", 800), workload("web-b", 800)), client)
    plan = await harness.rebalancer.cycle(harness.runtime(policy("DryRun"), LOADS))
    assert plan is not None
    [move] = plan.moves
    assert move.pod.name == "web-b"
    assert "; its share: cpu 20% (estimate: 1 x request 800m); " in move.reason


async def test_a_failed_usage_query_leaves_the_estimates_to_stand_in(
    prometheus: FakePrometheus, client: PrometheusClient
) -> None:
    answer_cycles(prometheus, SUSTAINED, {"web-a": 1.6})
    answered = prometheus.handler

    async def failing_usage(request: RecordedRequest) -> web.StreamResponse:
        if request.query.startswith(CPU_USAGE_QUERY_START):
            return FakePrometheus.prometheus_error(422, "execution", "query timed out")
        return await answered(request)

    prometheus.handler = failing_usage
    harness = Harness(hot_and_cool(workload("web-a", 800), workload("web-b", 400)), client)
    plan = await harness.rebalancer.cycle(harness.runtime(policy("DryRun"), LOADS))
    assert plan is not None
    assert [(move.pod.name, "(estimate: 1 x request 800m)" in move.reason) for move in plan.moves] == [
        ("web-a", True)
    ]


async def test_usage_is_asked_once_per_resource_per_cycle_for_the_hot_nodes_movable_pods(
    prometheus: FakePrometheus, client: PrometheusClient
) -> None:
    answer_cycles(prometheus, SUSTAINED, {})
    pods = [workload(f"web-{index}", 100) for index in range(6)]
    agent = workload("agent", 100, controller="DaemonSet/agent")  # never moves: not asked about
    elsewhere = dataclasses.replace(workload("cool-web", 100), node_name="cool")  # not on a hot node
    cache = hot_and_cool(*pods, agent, elsewhere)
    harness = Harness(cache, client)
    await harness.rebalancer.cycle(harness.runtime(policy("DryRun"), LOADS))
    queries = usage_queries(prometheus)
    [cpu] = [query for query in queries if query.startswith(CPU_USAGE_QUERY_START)]
    [memory] = [query for query in queries if query.startswith(MEMORY_USAGE_QUERY_START)]
    assert len(queries) == 2
    names = "|".join(sorted(pod.name for pod in pods))
    for query in (cpu, memory):
        assert f'namespace=~"^(?:ns)$", pod=~"^(?:{names})$"' in query
    assert cpu.endswith("[5m]))")  # the pods' usage over sustainedFor, as the node was judged


async def test_no_hot_node_asks_no_usage(prometheus: FakePrometheus, client: PrometheusClient) -> None:
    answer_cycles(prometheus, {"hot": 80.0, "cool": 20.0}, {})
    harness = Harness(hot_and_cool(workload("web", 800)), client)
    plan = await harness.rebalancer.cycle(harness.runtime(policy("DryRun"), LOADS))
    assert plan is not None
    assert plan.hot == ()
    assert usage_queries(prometheus) == []


def test_each_resource_is_observed_or_estimated_on_its_own() -> None:
    # hot: 4 cores and 16Gi. web shows cpu (1 core) and no memory series; 4Gi is the working set of db.
    web, db = workload("web", 800), workload("db", 400)
    cache = hot_and_cool(web, db)
    usage = PodUsage(ResourceUsage("", {("ns", "web"): 1.0}), ResourceUsage("", {("ns", "db"): 4.0 * 2**30}))
    estimates = Estimates(snapshot_of(plan_from_policy(policy().spec), {"cpu": LOADS}, at=0.0), cache)
    shares = PodShares(cache, usage, "5m", estimates)
    assert shares.of(web, "cpu", "hot") == Share(25.0, "observed over 5m")
    assert shares.of(web, "memory", "hot") == Share(100 * 64 / (16 * 1024), "estimate: 1 x request 64Mi")
    assert shares.of(db, "cpu", "hot") == Share(10.0, "estimate: 1 x request 400m")
    assert shares.of(db, "memory", "hot") == Share(25.0, "observed working set")
    assert shares.of(web, "diskIO", "hot") is None  # no per-pod figure
    assert shares.of(web, "cpu", "gone") is None
