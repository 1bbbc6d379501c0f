"""The network query sent as its traffic and its link speeds, divided here: the same node values as the
whole query (promtool over kube-prometheus-stack's series), and the link speeds asked again only once
older than staleAfter or missing a node."""

from __future__ import annotations

import dataclasses
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kube_prometheus_stack as kps
import pytest
from aiohttp import web

from promsched.api.plugin_specs import PluginSpec
from promsched.metrics import (
    NodeDirectory,
    PrometheusClient,
    PrometheusHTTPError,
    Snapshot,
    plan_from_policy,
    take_snapshot,
)
from promsched.metrics.dividing import Divisors, SplitQuery, divided
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins import build_plugin
from promsched.metrics.samples import QueryResult, Series
from support.fake_prometheus import FakePrometheus, RecordedRequest
from support.promtool import assert_evaluates_to

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")

Expected = list[tuple[dict[str, str], float]]


def network(identity: NodeIdentity, **settings: Any) -> SplitQuery:
    split = build_plugin(PluginSpec(name="network", **settings), identity).split
    assert split is not None
    return split


def result(query: str, expected: Expected, at: float = 0.0) -> QueryResult:
    return QueryResult(query, tuple(Series(labels, value, at) for labels, value in expected))


# What each part gives on kube-prometheus-stack's series: worker-01's 200 B/s over a hundredth of its
# 1000 B/s eth0; worker-02 and -03, of unknown speed, over 1.
TRAFFIC = {"worker-01": 200.0, "worker-02": 400.0, "worker-03": 300.0}
HUNDREDTH_OF_SPEED = {"worker-01": 10.0}
PER_BYTE = {"worker-02": 1.0, "worker-03": 1.0}


@needs_promtool
@pytest.mark.parametrize("identity", kps.IDENTITIES, ids=lambda i: i.source.value)
def test_the_parts_divided_give_what_the_whole_query_gives(tmp_path: Path, identity: NodeIdentity) -> None:
    split = network(identity)
    traffic = [(kps.result_labels(identity, kps.host_of(node)), value) for node, value in TRAFFIC.items()]
    divisors = kps.network_answer(identity, HUNDREDTH_OF_SPEED, PER_BYTE)
    assert_evaluates_to(tmp_path, kps.input_series(), split.numerator, traffic)
    assert_evaluates_to(tmp_path, kps.input_series(), split.divisor, divisors)

    whole = divided(
        result("traffic", traffic), Divisors.of(result("speeds", divisors), split, 0.0), split, "q"
    )

    # What test_plugin_queries asserts the whole query gives.
    expected = kps.network_answer(identity, kps.NETWORK_PERCENT, kps.NETWORK_BYTES)
    assert sorted(((dict(s.labels), s.value) for s in whole.series), key=str) == sorted(expected, key=str)
    assert whole.query == "q"


def test_a_node_without_a_divisor_is_left_out_and_labels_are_carried() -> None:
    split = SplitQuery("n", "d", on="instance", carried="unit")
    numerator = QueryResult(
        "n",
        (Series({"instance": "a"}, 50.0, 7.0), Series({"instance": "b"}, 5.0, 7.0)),
        (Series({"instance": "c"}, math.nan, 7.0),),
        warnings=("partial",),
    )
    speeds = QueryResult(
        "d",
        (
            Series({"instance": "a", "unit": "percent"}, 10.0, 1.0),
            Series({"instance": "c", "unit": "x"}, 2.0, 1.0),
        ),
    )

    answer = divided(numerator, Divisors.of(speeds, split, 1.0), split, "whole")

    assert answer.series == (Series({"instance": "a", "unit": "percent"}, 5.0, 7.0),)
    [(labels, value, _)] = answer.non_finite
    assert labels == {"instance": "c", "unit": "x"}
    assert math.isnan(value)
    assert answer.warnings == ("partial",)


def test_a_divisor_without_the_carried_label_leaves_it_off() -> None:
    split = SplitQuery("n", "d", on="instance", carried="unit")
    numerator = result("n", [({"instance": "a", "unit": "stale"}, 4.0)])
    bare = result("d", [({"instance": "a"}, 2.0)])

    answer = divided(numerator, Divisors.of(bare, split, 0.0), split, "whole")

    assert answer.series == (Series({"instance": "a"}, 2.0, 0.0),)


def test_a_zero_divisor_gives_what_prometheus_gives() -> None:
    split = SplitQuery("n", "d", on="instance", carried="unit")
    numerator = result("n", [({"instance": "a"}, 3.0), ({"instance": "b"}, 0.0)])
    zero = result("d", [({"instance": "a", "unit": "u"}, 0.0), ({"instance": "b", "unit": "u"}, 0.0)])

    answer = divided(numerator, Divisors.of(zero, split, 0.0), split, "whole")

    assert answer.series == ()
    infinite, undefined = (s.value for s in answer.non_finite)
    assert infinite == math.inf
    assert math.isnan(undefined)


def test_a_non_finite_divisor_gives_a_non_finite_value_to_report() -> None:
    split = SplitQuery("n", "d", on="instance", carried="unit")
    numerator = result("n", [({"instance": "a"}, 3.0)])
    speeds = QueryResult("d", (), (Series({"instance": "a", "unit": "u"}, math.nan, 0.0),))

    answer = divided(numerator, Divisors.of(speeds, split, 0.0), split, "whole")

    assert answer.series == ()
    [(labels, value, _)] = answer.non_finite
    assert labels == {"instance": "a", "unit": "u"}
    assert math.isnan(value)


NODES = NodeDirectory.of(["node-0", "node-1"])
BY_INSTANCE = {"source": "Label", "label": "instance"}
SPEED_METRIC = "node_network_speed_bytes"


class Network:
    """A fake Prometheus's network answers: traffic per node, and a link speed per node (percent)."""

    def __init__(
        self, prometheus: FakePrometheus, traffic: dict[str, float], speeds: dict[str, float]
    ) -> None:
        self.prometheus, self.traffic, self.speeds = prometheus, traffic, speeds
        self.failing_speeds = False
        prometheus.handler = self.answer

    async def answer(self, request: RecordedRequest) -> web.StreamResponse:
        at = float(request.form["time"])
        if SPEED_METRIC in request.query:
            if self.failing_speeds:
                return web.Response(status=500, text="down")
            items = [
                ({"instance": f"{n}:9100", "promsched_unit": "percent"}, v / 100)
                for n, v in self.speeds.items()
            ]
        else:
            items = [({"instance": f"{n}:9100"}, v) for n, v in self.traffic.items()]
        return self.prometheus.vector(*items, at=at)

    def speed_queries(self) -> int:
        return sum(SPEED_METRIC in query for query in self.prometheus.queries())


def network_plan(make_spec: Callable[..., Any], **spec: Any) -> Any:
    return plan_from_policy(make_spec({"name": "network"}, nodeIdentity=BY_INSTANCE, **spec))


def values(snapshot: Snapshot) -> dict[str, float]:
    return {node: sample.value for node, sample in snapshot.plugins["network"].samples.items()}


async def test_link_speeds_are_asked_once_and_kept_while_fresh(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = network_plan(make_spec, staleAfter="2m")
    fake = Network(prometheus, {"node-0": 100.0, "node-1": 300.0}, {"node-0": 1000.0, "node-1": 1000.0})
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(plan, client, NODES)
        fake.traffic = {"node-0": 200.0, "node-1": 500.0}
        second = await take_snapshot(plan, client, NODES, previous=first)

    assert values(first) == {"node-0": 10.0, "node-1": 30.0}
    assert values(second) == {"node-0": 20.0, "node-1": 50.0}  # new traffic, the speeds kept
    assert fake.speed_queries() == 1
    assert len(prometheus.queries()) == 3


def aged(snapshot: Snapshot, seconds: float) -> Snapshot:
    """`snapshot` with its network divisors asked `seconds` earlier."""
    part = snapshot.plugins["network"]
    assert part.divisors is not None
    divisors = dataclasses.replace(part.divisors, asked_at=part.divisors.asked_at - seconds)
    return dataclasses.replace(snapshot, plugins={"network": dataclasses.replace(part, divisors=divisors)})


async def test_link_speeds_are_asked_again_once_as_old_as_stale_after(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = network_plan(make_spec, staleAfter="1m")
    fake = Network(prometheus, {"node-0": 100.0}, {"node-0": 1000.0})
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(plan, client, NODES)
        fake.speeds = {"node-0": 500.0}
        second = await take_snapshot(plan, client, NODES, previous=aged(first, 60.0))

    assert fake.speed_queries() == 2
    assert values(second) == {"node-0": 20.0}
    divisors = second.plugins["network"].divisors
    assert divisors is not None
    assert divisors.asked_at == second.taken_at


async def test_link_speeds_are_asked_again_for_a_node_that_joined(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = network_plan(make_spec)
    fake = Network(prometheus, {"node-0": 100.0}, {"node-0": 1000.0})
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(plan, client, NODES)
        fake.traffic, fake.speeds = {"node-0": 100.0, "node-1": 50.0}, {"node-0": 1000.0, "node-1": 100.0}
        second = await take_snapshot(plan, client, NODES, previous=first)

    assert fake.speed_queries() == 2
    assert values(second) == {"node-0": 10.0, "node-1": 50.0}


async def test_failed_link_speeds_fail_the_plugin_and_keep_its_values(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = network_plan(make_spec, staleAfter="1m")
    fake = Network(prometheus, {"node-0": 100.0}, {"node-0": 1000.0})
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(plan, client, NODES)
        fake.failing_speeds = True
        second = await take_snapshot(plan, client, NODES, previous=aged(first, 60.0))

    network_part = second.plugins["network"]
    assert isinstance(network_part.error, PrometheusHTTPError)
    assert network_part.samples == first.plugins["network"].samples
    assert network_part.divisors == aged(first, 60.0).plugins["network"].divisors
