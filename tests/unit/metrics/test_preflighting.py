"""Preflight: failed queries with Prometheus's own error text, and nodes without series."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import kube_prometheus_stack as kps
import pytest
from aiohttp import web

from promsched.api.policies import NodeIdentitySource
from promsched.metrics import (
    NodeDirectory,
    NodeIdentity,
    PrometheusClient,
    PrometheusEndpoint,
    plan_from_policy,
    preflight,
)
from promsched.metrics.identifying import UNAME_QUERY
from support.fake_prometheus import FakePrometheus, RecordedRequest


async def test_preflight_reports_failures_and_missing_nodes(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_from_policy(
        make_spec(
            {"name": "cpu"},
            {"name": "gpu", "query": "avg by (instance) (DCGM_FI_DEV_GPU_UTIL"},
            nodeIdentity={"source": "Label", "label": "instance"},
        )
    )
    nodes = ["node-extra", "node-0", "node-1"] + [f"spare-{i:02}" for i in range(25)]

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        if "DCGM" in request.query:
            return prometheus.prometheus_error(
                400, "bad_data", "1:40: parse error: unclosed left parenthesis"
            )
        return prometheus.vector(({"instance": "node-0:9100"}, 5), ({"instance": "node-1:9100"}, 7))

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint()) as client:
        report = await preflight(plan, client, NodeDirectory.of(nodes))

    status = report.to_object()
    assert set(status) == {"checkedAt", "queries", "missingSeries"}
    assert status["queries"] == [
        {"plugin": "cpu", "query": plan.plugins[0].query, "ok": True},
        {
            "plugin": "gpu",
            "query": "avg by (instance) (DCGM_FI_DEV_GPU_UTIL",
            "ok": False,
            "error": "bad_data: 1:40: parse error: unclosed left parenthesis",
        },
    ]
    # The failed query's nodes are not listed as missing: its error says it all.
    [missing] = status["missingSeries"]
    assert missing["plugin"] == "cpu"
    assert missing["count"] == 26
    assert missing["nodes"][0] == "node-extra"
    assert len(missing["nodes"]) == 20
    assert missing["unmatchedSeries"] == []  # every series the query gave was a node's


async def test_preflight_names_the_series_it_could_not_map_to_a_node(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    """An identity that does not fit the series (here: instances without node_uname_info) shows in the
    series that went unused, next to the nodes left without one."""
    plan = plan_from_policy(make_spec({"name": "cpu"}))
    instances = [f"10.0.0.{i}:9100" for i in range(8)]

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        if request.query == UNAME_QUERY:
            return prometheus.vector(({"instance": instances[0], "nodename": "node-0"}, 1))
        return prometheus.vector(*(({"instance": instance}, 5) for instance in instances))

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint()) as client:
        report = await preflight(plan, client, NodeDirectory.of(["node-0", "node-1"]))

    [missing] = report.missing_series
    assert (missing.nodes, missing.count) == (["node-1"], 1)
    assert missing.unmatched_series == [
        f'instance="{instance}" (no single nodename in node_uname_info)' for instance in instances[1:6]
    ]


async def test_preflight_of_an_unreachable_prometheus(make_spec: Callable[..., Any]) -> None:
    plan = plan_from_policy(make_spec({"name": "cpu"}))
    with socket.socket() as sock:  # a port nobody listens on once this socket closes
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    endpoint = PrometheusEndpoint(url, timeout_seconds=1, retries=0)
    async with PrometheusClient(endpoint) as client:
        report = await preflight(plan, client, NodeDirectory.of(["node-0"]))
    [query] = report.queries
    assert not query.ok
    assert query.error is not None
    assert query.error.startswith(f"cannot reach Prometheus at {url}")
    assert report.missing_series == []


@pytest.mark.parametrize("identity", kps.IDENTITIES, ids=lambda identity: identity.source.value)
async def test_every_node_is_matched_on_kube_prometheus_stack(
    prometheus: FakePrometheus, make_spec: Callable[..., Any], identity: NodeIdentity
) -> None:
    """`instance` is `IP:9100`, `node` the pod's node, and the hosts' names are not lowercase."""
    settings = {"source": identity.source.value}
    if identity.source is not NodeIdentitySource.UNAME_NODENAME:
        settings["label"] = identity.label
    plan = plan_from_policy(make_spec({"name": "network"}, nodeIdentity=settings))
    answer = kps.network_answer(identity, kps.NETWORK_PERCENT, kps.NETWORK_BYTES)

    async def handler(request: RecordedRequest) -> web.StreamResponse:
        return prometheus.vector(*(kps.uname_answer() if request.query == UNAME_QUERY else answer))

    prometheus.handler = handler
    async with PrometheusClient(prometheus.endpoint()) as client:
        report = await preflight(plan, client, NodeDirectory.of(kps.NODES, kps.ADDRESSES))

    assert [query.ok for query in report.queries] == [True]
    assert report.missing_series == []


async def test_preflight_names_the_aggregation_of_each_query_that_does_not_take_the_mean(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_from_policy(
        make_spec(
            {"name": "cpu", "aggregation": "p90"},
            {"name": "memory"},
            {"name": "diskIO", "aggregation": "max"},
            nodeIdentity={"source": "Label", "label": "instance"},
        )
    )

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return prometheus.vector(({"instance": "node-0:9100"}, 5))

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint()) as client:
        report = await preflight(plan, client, NodeDirectory.of(["node-0"]))

    queries = report.to_object()["queries"]
    assert [(query["plugin"], query.get("aggregation")) for query in queries] == [
        ("cpu", "p90"),
        ("memory", None),
        ("diskIO", "max"),
    ]
    assert queries[0]["query"].startswith("quantile_over_time(0.9, ")
