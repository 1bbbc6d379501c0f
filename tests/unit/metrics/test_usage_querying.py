"""Pods' usage for estimates: one vector query per resource per refresh, beside the plugins' queries."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from aiohttp import web

from promsched.metrics import (
    NodeDirectory,
    PrometheusClient,
    offloading,
    plan_from_policy,
    take_snapshot,
    usage_querying,
)
from promsched.metrics.identifying import UNAME_QUERY
from promsched.metrics.samples import QueryResult
from promsched.metrics.usage_querying import (
    CPU_USAGE_METRIC,
    MEMORY_USAGE_METRIC,
    cpu_usage_query,
    memory_usage_query,
)
from support.fake_prometheus import FakePrometheus, RecordedRequest
from support.letting_go import LettingGo
from support.policies import policy_spec

NODES = NodeDirectory.of([f"node-{index}" for index in range(3)])
SIBLINGS = {"source": "Siblings", "window": "2m"}


def pods(prometheus: FakePrometheus, cpu: float, *, memory_fails: bool = False) -> None:
    """Answers the usage queries with two pods (and a series without a pod label), the rest empty."""

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        at = float(request.form["time"])
        if CPU_USAGE_METRIC in request.query:
            return prometheus.vector(
                ({"namespace": "ns", "pod": "web-0"}, cpu),
                ({"namespace": "ns", "pod": "web-1"}, 2 * cpu),
                ({"namespace": "ns"}, 9.0),
                at=at,
            )
        if MEMORY_USAGE_METRIC in request.query:
            if memory_fails:
                return web.Response(status=503, text="overloaded")
            return prometheus.vector(({"namespace": "ns", "pod": "web-0"}, 1e9), at=at)
        return prometheus.vector(at=at)

    prometheus.handler = answer


def test_the_queries_sum_each_pods_containers() -> None:
    containers = '{container!="", container!="POD"}'
    assert cpu_usage_query(120) == (
        f"sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{containers}[2m]))"
    )
    assert memory_usage_query() == f"sum by (namespace, pod) (container_memory_working_set_bytes{containers})"


async def test_one_query_per_resource_per_refresh(prometheus: FakePrometheus) -> None:
    plan = plan_from_policy(policy_spec({"name": "cpu"}, {"name": "memory"}, estimation=SIBLINGS))
    pods(prometheus, 0.25)
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(plan, client, NODES)
        second = await take_snapshot(plan, client, NODES, previous=first)

    usage_queries = [cpu_usage_query(120), memory_usage_query()]
    expected = Counter([*2 * ([plugin.query for plugin in plan.plugins] + usage_queries), UNAME_QUERY])
    # per refresh: each plugin once, each resource once; the nodes' hostnames once, kept for the second
    assert Counter(prometheus.queries()) == expected
    assert second.usage.cpu.values == {("ns", "web-0"): 0.25, ("ns", "web-1"): 0.5}
    assert second.usage.memory.values == {("ns", "web-0"): 1e9}
    assert second.usage.cpu.refreshed_at == second.taken_at


async def test_estimating_by_requests_queries_no_usage(prometheus: FakePrometheus) -> None:
    plan = plan_from_policy(policy_spec({"name": "cpu"}))
    pods(prometheus, 0.25)
    async with PrometheusClient(prometheus.endpoint()) as client:
        snapshot = await take_snapshot(plan, client, NODES)
    assert sorted(prometheus.queries()) == sorted([plan.plugins[0].query, UNAME_QUERY])
    assert snapshot.usage.cpu.values == {}


async def test_a_failed_usage_query_keeps_the_last_values(prometheus: FakePrometheus) -> None:
    plan = plan_from_policy(policy_spec({"name": "cpu"}, estimation=SIBLINGS))
    pods(prometheus, 0.25)
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(plan, client, NODES)
        pods(prometheus, 1.0, memory_fails=True)
        second = await take_snapshot(plan, client, NODES, previous=first)

    assert second.usage.cpu.values[("ns", "web-0")] == 1.0
    assert second.usage.memory.values == first.usage.memory.values
    assert second.usage.memory.refreshed_at == first.taken_at
    assert "503" in str(second.usage.memory.error)
    assert second.errors == {}  # the plugins' queries all worked
    # Values older than staleAfter count for nothing.
    assert second.usage.memory.fresh_values(first.taken_at + 1) == {}


async def test_the_usage_answers_are_read_and_freed_on_the_metrics_worker(
    prometheus: FakePrometheus, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_from_policy(policy_spec({"name": "cpu"}, estimation=SIBLINGS))
    pods(prometheus, 0.25)
    threads: set[str] = set()
    letting_go = LettingGo()
    by_pod = usage_querying._by_pod

    def reading(result: QueryResult) -> dict[tuple[str, str], float]:
        threads.add(threading.current_thread().name)
        return by_pod(result)

    monkeypatch.setattr(usage_querying, "_by_pod", reading)
    monkeypatch.setattr(offloading, "let_go", letting_go)
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        snapshot = await take_snapshot(plan, client, NODES)

    assert snapshot.usage.cpu.values == {("ns", "web-0"): 0.25, ("ns", "web-1"): 0.5}
    assert {thread.rsplit("_", 1)[0] for thread in threads} == {offloading.WORKER_NAME}
    # The usage answers, beside the plugin's and node_uname_info's.
    assert sorted(letting_go.queries) == sorted(
        [*(plugin.query for plugin in plan.plugins), UNAME_QUERY, cpu_usage_query(120), memory_usage_query()]
    )
