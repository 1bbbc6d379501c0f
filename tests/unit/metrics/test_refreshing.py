"""Snapshots from a fake Prometheus: one query per plugin, concurrent, last good values kept; the loop."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from promsched.api.policies import SchedulingPolicySpec
from promsched.metrics import (
    NodeDirectory,
    Plan,
    PrometheusClient,
    PrometheusError,
    PrometheusHTTPError,
    Refresher,
    RefreshObserver,
    Snapshot,
    offloading,
    plan_from_policy,
    querying,
    refreshing,
    score_nodes,
    take_snapshot,
)
from promsched.metrics.identifying import UNAME_QUERY
from support.fake_prometheus import FakePrometheus, Handler, RecordedRequest
from support.letting_go import LettingGo

NODES = NodeDirectory.of(["node-0", "node-1"])
BY_INSTANCE = {"source": "Label", "label": "instance"}


def plan_for(make_spec: Callable[..., SchedulingPolicySpec], *plugins: dict[str, Any], **spec: Any) -> Plan:
    spec.setdefault("nodeIdentity", BY_INSTANCE)
    return plan_from_policy(make_spec(*plugins, **spec))


def loads(prometheus: FakePrometheus, values: dict[str, dict[str, float]]) -> Handler:
    """A handler answering each plugin's query (recognised by its metric) with per-node values."""
    metric_of = {"cpu": "node_cpu_seconds_total", "memory": "node_memory_MemAvailable_bytes"}

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        for plugin, per_node in values.items():
            if metric_of[plugin] in request.query:
                items = [({"instance": f"{node}:9100"}, value) for node, value in per_node.items()]
                return prometheus.vector(*items, at=float(request.form["time"]))
        return web.Response(status=500, text=f"no answer for {request.query}")

    return answer


class Recorder(RefreshObserver):
    def __init__(self) -> None:
        self.snapshots: asyncio.Queue[Snapshot] = asyncio.Queue()
        self.queries: list[tuple[str, float, PrometheusError | None]] = []

    def query_finished(self, plugin: str, seconds: float, error: PrometheusError | None) -> None:
        self.queries.append((plugin, seconds, error))

    def snapshot_taken(self, snapshot: Snapshot) -> None:
        self.snapshots.put_nowait(snapshot)

    async def next_snapshot(self) -> Snapshot:
        return await asyncio.wait_for(self.snapshots.get(), timeout=5)


async def test_one_query_per_plugin_all_at_once(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_for(make_spec, {"name": "cpu"}, {"name": "memory"})
    both_asked = asyncio.Event()
    answer = loads(prometheus, {"cpu": {"node-0": 10, "node-1": 20}, "memory": {"node-0": 30}})

    async def together(request: RecordedRequest) -> web.StreamResponse:
        if len(prometheus.requests) == 2:
            both_asked.set()
        await asyncio.wait_for(both_asked.wait(), timeout=1)  # fails if the plugins were queried in turn
        return await answer(request)

    prometheus.handler = together
    async with PrometheusClient(prometheus.endpoint()) as client:
        snapshot = await take_snapshot(plan, client, NODES)

    assert sorted(prometheus.queries()) == sorted(plugin.query for plugin in plan.plugins)
    assert len({request.form["time"] for request in prometheus.requests}) == 1
    values = {
        name: {node: s.value for node, s in samples.items()} for name, samples in snapshot.values().items()
    }
    assert values == {"cpu": {"node-0": 10, "node-1": 20}, "memory": {"node-0": 30}}
    assert snapshot.errors == {}
    assert snapshot.plugins["cpu"].refreshed_at == snapshot.taken_at
    assert snapshot.age_seconds("cpu", snapshot.taken_at + 7) == pytest.approx(7)


async def test_a_failed_query_keeps_the_last_good_values(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_for(make_spec, {"name": "cpu"}, {"name": "memory"}, staleAfter="1m")
    prometheus.handler = loads(prometheus, {"cpu": {"node-0": 10}, "memory": {"node-0": 30}})
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(plan, client, NODES)
        prometheus.handler = loads(prometheus, {"memory": {"node-0": 40}})  # cpu's query now fails
        second = await take_snapshot(plan, client, NODES, previous=first)

    cpu = second.plugins["cpu"]
    assert cpu.samples == first.plugins["cpu"].samples
    assert cpu.refreshed_at == first.plugins["cpu"].refreshed_at
    assert isinstance(cpu.error, PrometheusHTTPError)
    assert set(second.errors) == {"cpu"}
    assert second.plugins["memory"].samples["node-0"].value == 40
    # The kept cpu value ages: missing (Neutral, 50) once older than staleAfter.
    [fresh] = score_nodes(second, ["node-0"], now=first.taken_at + 30)
    [stale] = score_nodes(second, ["node-0"], now=first.taken_at + 61)
    assert fresh.plugins[0] == ("cpu", 10, 90)
    assert stale.plugins[0] == ("cpu", None, 50)


def with_hostnames(prometheus: FakePrometheus, answer: Handler, hostnames: dict[str, str] | None) -> Handler:
    """`answer`, and UNAME_QUERY answered with instance `<node>:9100` -> `hostnames[node]` (None: 503)."""

    async def both(request: RecordedRequest) -> web.StreamResponse:
        if request.query != UNAME_QUERY:
            return await answer(request)
        if hostnames is None:
            return web.Response(status=503, text="node_uname_info is not there today")
        items = [({"instance": f"{node}:9100", "nodename": host}, 1.0) for node, host in hostnames.items()]
        return prometheus.vector(*items, at=float(request.form["time"]))

    return both


async def test_uname_identity_asks_node_uname_info_once_for_every_plugin(
    prometheus: FakePrometheus, make_spec: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_for(make_spec, {"name": "cpu"}, {"name": "memory"}, nodeIdentity={"source": "UnameNodename"})
    # Host NODE-1 is node node-1 (the kubelet lowercases); instance ghost:9100 has no node_uname_info.
    per_node = {"node-0": 10.0, "node-1": 20.0, "ghost": 5.0}
    answer = loads(prometheus, {"cpu": per_node, "memory": {"node-0": 30}})
    prometheus.handler = with_hostnames(prometheus, answer, {"node-0": "node-0", "node-1": "NODE-1"})
    recorder = Recorder()
    letting_go = LettingGo()
    monkeypatch.setattr(offloading, "let_go", letting_go)
    async with PrometheusClient(prometheus.endpoint()) as client:
        snapshot = await take_snapshot(plan, client, NODES, observer=recorder)

    assert Counter(prometheus.queries()) == Counter([*(plugin.query for plugin in plan.plugins), UNAME_QUERY])
    # Every answer is freed on the metrics worker once read, node_uname_info's too.
    assert sorted(letting_go.queries) == sorted([*(plugin.query for plugin in plan.plugins), UNAME_QUERY])
    assert all("node_uname_info" not in plugin.query for plugin in plan.plugins)
    values = {
        name: {node: s.value for node, s in samples.items()} for name, samples in snapshot.values().items()
    }
    assert values == {"cpu": {"node-0": 10, "node-1": 20}, "memory": {"node-0": 30}}
    assert snapshot.plugins["cpu"].report.unmatched == (
        'instance="ghost:9100" (no single nodename in node_uname_info)',
    )
    assert sorted(name for name, _seconds, _error in recorder.queries) == ["cpu", "memory", "nodeIdentity"]


async def test_node_uname_info_is_kept_for_the_refreshes_after(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_for(make_spec, {"name": "cpu"}, {"name": "memory"}, nodeIdentity={"source": "UnameNodename"})
    hosts = {"node-0": "node-0", "node-1": "NODE-1"}
    first_loads = loads(prometheus, {"cpu": {"node-0": 10}, "memory": {}})
    prometheus.handler = with_hostnames(prometheus, first_loads, hosts)
    async with PrometheusClient(prometheus.endpoint()) as client:
        first = await take_snapshot(plan, client, NODES)
        second_loads = loads(prometheus, {"cpu": {"node-0": 11, "node-1": 21}, "memory": {"node-1": 31}})
        prometheus.handler = with_hostnames(prometheus, second_loads, hosts)
        second = await take_snapshot(plan, client, NODES, previous=first)

    assert prometheus.queries().count(UNAME_QUERY) == 1
    assert second.hostnames is first.hostnames
    values = {
        name: {node: s.value for node, s in samples.items()} for name, samples in second.values().items()
    }
    assert values == {"cpu": {"node-0": 11, "node-1": 21}, "memory": {"node-1": 31}}


def _older(snapshot: Snapshot, seconds: float) -> Snapshot:
    assert snapshot.hostnames is not None
    hostnames = dataclasses.replace(snapshot.hostnames, asked_at=snapshot.hostnames.asked_at - seconds)
    return dataclasses.replace(snapshot, hostnames=hostnames)


AT_ADDRESSES = NodeDirectory.of(["node-0", "node-1"], {"10.0.0.1": "node-0"})


@pytest.mark.parametrize(
    ("why", "nodes", "previous", "answered"),
    [
        ("staleAfter old", AT_ADDRESSES, lambda first: _older(first, 61), {"node-0"}),
        (
            "a node joined",
            NodeDirectory.of(["node-0", "node-1", "node-2"], AT_ADDRESSES.addresses),
            lambda first: first,
            {"node-0"},
        ),
        (  # a node replaced at another's former address: the same names, a changed InternalIP
            "an address changed",
            NodeDirectory.of(["node-0", "node-1"], {"10.0.0.9": "node-0"}),
            lambda first: first,
            {"node-0"},
        ),
        ("an instance it did not name", AT_ADDRESSES, lambda first: first, {"node-0", "node-1"}),
    ],
)
async def test_node_uname_info_is_asked_again(
    prometheus: FakePrometheus,
    make_spec: Callable[..., Any],
    why: str,
    nodes: NodeDirectory,
    previous: Callable[[Snapshot], Snapshot],
    answered: set[str],
) -> None:
    uname = {"source": "UnameNodename"}
    plan = plan_for(make_spec, {"name": "cpu"}, {"name": "memory"}, nodeIdentity=uname, staleAfter="1m")
    prometheus.handler = with_hostnames(
        prometheus, loads(prometheus, {"cpu": {"node-0": 10}, "memory": {"node-0": 30}}), {"node-0": "node-0"}
    )
    recorder = Recorder()
    async with PrometheusClient(prometheus.endpoint()) as client:
        first = await take_snapshot(plan, client, AT_ADDRESSES)
        cpu = dict.fromkeys(answered, 11.0)
        prometheus.handler = with_hostnames(
            prometheus,
            loads(prometheus, {"cpu": cpu, "memory": {"node-0": 31}}),
            {"node-0": "node-0", "node-1": "node-1"},
        )
        second = await take_snapshot(plan, client, nodes, previous=previous(first), observer=recorder)

    assert prometheus.queries().count(UNAME_QUERY) == 2, why  # once for both plugins
    assert [name for name, _seconds, _error in recorder.queries].count("nodeIdentity") == 1
    assert second.hostnames is not None
    assert second.hostnames.asked_at == second.taken_at
    assert {node: s.value for node, s in second.plugins["cpu"].samples.items()} == cpu


async def test_a_failed_node_uname_info_query_keeps_the_plugins_last_values(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_for(make_spec, {"name": "cpu"}, {"name": "memory"}, nodeIdentity={"source": "UnameNodename"})
    answer = loads(prometheus, {"cpu": {"node-0": 10}, "memory": {"node-0": 20}})
    prometheus.handler = with_hostnames(prometheus, answer, {"node-0": "node-0"})
    recorder = Recorder()
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(plan, client, NODES)
        prometheus.handler = with_hostnames(prometheus, answer, None)
        # A node joined: the first refresh's hostnames are not for these nodes, so they are asked again.
        joined = NodeDirectory.of([*NODES.names, "node-2"])
        second = await take_snapshot(plan, client, joined, previous=first, observer=recorder)

    for name in ("cpu", "memory"):
        plugin = second.plugins[name]
        assert plugin.samples == first.plugins[name].samples
        assert plugin.refreshed_at == first.plugins[name].refreshed_at
        assert isinstance(plugin.error, PrometheusHTTPError)
        assert UNAME_QUERY in str(plugin.error)  # the error names the query that failed
        # Each plugin raises the one error afresh: its traceback does not grow by a frame per plugin.
        frames = [frame.name for frame in traceback.extract_tb(plugin.error.__traceback__)]
        assert frames.count("_refresh_plugin") == 1, frames
    assert [(name, error is not None) for name, _seconds, error in sorted(recorder.queries)] == [
        ("cpu", True),
        ("memory", True),
        ("nodeIdentity", True),
    ]


async def test_a_changed_plugin_rescores_kept_values(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    old = plan_for(make_spec, {"name": "cpu"})
    new = plan_for(make_spec, {"name": "cpu", "threshold": 50})
    prometheus.handler = loads(prometheus, {"cpu": {"node-0": 70}})
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(old, client, NODES)
        prometheus.handler = loads(prometheus, {})
        second = await take_snapshot(new, client, NODES, previous=first)
    assert second.plugins["cpu"].samples["node-0"].over_threshold
    assert second.plugins["cpu"].error is not None


async def test_a_failed_query_without_history_is_empty(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_for(make_spec, {"name": "cpu"})
    prometheus.handler = loads(prometheus, {})
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        snapshot = await take_snapshot(plan, client, NODES)
    assert snapshot.plugins["cpu"].samples == {}
    assert snapshot.plugins["cpu"].refreshed_at is None
    assert snapshot.age_seconds("cpu", 0) is None


async def test_unusable_series_are_reported_in_the_snapshot(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_for(make_spec, {"name": "cpu"})

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return prometheus.vector(
            ({"instance": "node-0:9100"}, 1),
            ({"instance": "node-0:9101"}, 2),
            ({"instance": "stranger:9100"}, 3),
            ({"instance": "node-1:9100"}, "NaN"),
        )

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint()) as client:
        snapshot = await take_snapshot(plan, client, NODES)
    report = snapshot.plugins["cpu"].report
    assert snapshot.plugins["cpu"].samples == {}
    assert report.duplicate_nodes == ("node-0",)
    assert report.unmatched == ('instance="stranger:9100"',)
    assert report.non_finite == ('instance="node-1:9100" = nan',)


async def test_refresher_loop_update_and_stop(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = dataclasses.replace(plan_for(make_spec, {"name": "cpu"}), refresh_interval_seconds=0.05)
    prometheus.handler = loads(prometheus, {"cpu": {"node-0": 10, "node-1": 20}})
    recorder = Recorder()
    refresher = Refresher(plan, prometheus.endpoint(), lambda: NODES, observer=recorder)
    assert refresher.latest.values() == {"cpu": {}}  # before the first refresh: everything missing
    refresher.start()
    try:
        for _ in range(3):
            snapshot = await recorder.next_snapshot()
        assert snapshot is refresher.latest
        assert snapshot.plugins["cpu"].samples["node-0"].value == 10
        assert [(name, error) for name, _, error in recorder.queries[:3]] == [("cpu", None)] * 3

        assert not await refresher.update(plan, refresher.endpoint)
        changed = dataclasses.replace(
            plan_for(make_spec, {"name": "cpu", "weight": 5}), refresh_interval_seconds=0.05
        )
        assert await refresher.update(changed, refresher.endpoint)
        assert refresher.running
        while (await recorder.next_snapshot()).plan is not changed:
            pass

        client = refresher.client
        assert await refresher.update(changed, prometheus.endpoint(timeout_seconds=1.5))
        assert refresher.client is not client
    finally:
        await refresher.stop()
    assert not refresher.running
    assert refresher.latest.plan is changed  # still readable after stop


async def test_the_loop_outlives_an_unexpected_error(
    prometheus: FakePrometheus, make_spec: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    plan = dataclasses.replace(plan_for(make_spec, {"name": "cpu"}), refresh_interval_seconds=0.01)
    calls = 0

    def nodes() -> NodeDirectory:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("node index not ready")
        return NODES

    recorder = Recorder()
    refresher = Refresher(plan, prometheus.endpoint(), nodes, observer=recorder)
    refresher.start()
    try:
        with caplog.at_level(logging.ERROR, logger="promsched.metrics.refreshing"):
            await recorder.next_snapshot()
    finally:
        await refresher.stop()
    assert calls >= 2
    assert "node index not ready" in caplog.text


async def test_a_refresh_parses_and_scores_every_node_on_the_metrics_worker_thread(
    prometheus: FakePrometheus, make_spec: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_for(make_spec, {"name": "cpu"}, {"name": "memory"})
    prometheus.handler = loads(prometheus, {"cpu": {"node-0": 10, "node-1": 20}, "memory": {"node-0": 30}})
    threads: dict[str, set[str]] = {}

    # The answer's parse, each plugin's samples and the nodes' scores: on the metrics worker thread.
    def recorded(module: Any, name: str) -> None:
        work = getattr(module, name)

        def recording(*args: Any) -> Any:
            threads.setdefault(name, set()).add(threading.current_thread().name)
            return work(*args)

        monkeypatch.setattr(module, name, recording)

    recorded(querying, "_vector")
    recorded(refreshing, "_plugin_snapshot")
    recorded(refreshing, "prescore")
    # Each plugin's answer is freed there too, once its samples are taken.
    letting_go = LettingGo()
    monkeypatch.setattr(offloading, "let_go", letting_go)
    refresher = Refresher(plan, prometheus.endpoint(), lambda: NODES)
    try:
        snapshot = await refresher.refresh()
    finally:
        await refresher.stop()

    assert set(threads) == {"_vector", "_plugin_snapshot", "prescore"}
    assert sorted(letting_go.queries) == sorted(plugin.query for plugin in plan.plugins)
    assert {name.rsplit("_", 1)[0] for name in set.union(*threads.values())} == {offloading.WORKER_NAME}
    scores = refresher.scores_for(snapshot)
    assert scores.snapshot is snapshot
    assert scores.scored is not None
    nodes = sorted(NODES.names)
    expected = score_nodes(snapshot, nodes, now=scores.scored.since)
    assert scores.scored.results == {result.node: result for result in expected}
    # Only the latest snapshot comes with its scores.
    assert refresher.scores_for(Snapshot.empty(plan, snapshot.taken_at)).scored is None


async def test_a_query_answered_with_warnings_is_told_to_the_observer(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_for(make_spec, {"name": "cpu"}, {"name": "memory"})

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        warnings = ["partial response: a store did not answer"] if "node_cpu" in request.query else None
        return prometheus.vector(({"instance": "node-0:9100"}, 10), warnings=warnings)

    prometheus.handler = answer
    warned: list[tuple[str, tuple[str, ...]]] = []

    class Warned(RefreshObserver):
        def query_warned(self, plugin: str, warnings: tuple[str, ...]) -> None:
            warned.append((plugin, warnings))

    async with PrometheusClient(prometheus.endpoint()) as client:
        snapshot = await take_snapshot(plan, client, NODES, observer=Warned())
    assert warned == [("cpu", ("partial response: a store did not answer",))]
    assert snapshot.plugins["cpu"].report.warnings == ("partial response: a store did not answer",)


async def test_the_observer_is_told_when_each_refresh_starts_and_ends_failed_or_not(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_for(make_spec, {"name": "cpu"})
    prometheus.handler = loads(prometheus, {"cpu": {"node-0": 10}})
    told: list[str] = []

    class Told(RefreshObserver):
        def refresh_started(self) -> None:
            told.append("started")

        def query_finished(self, plugin: str, seconds: float, error: PrometheusError | None) -> None:
            told.append(plugin)

        def refresh_ended(self) -> None:
            told.append("ended")

    failing = True

    def nodes() -> NodeDirectory:
        if failing:
            raise RuntimeError("node index not ready")
        return NODES

    refresher = Refresher(plan, prometheus.endpoint(), nodes, observer=Told())
    try:
        with pytest.raises(RuntimeError):
            await refresher.refresh()
        failing = False
        await refresher.refresh()
    finally:
        await refresher.stop()
    assert told == ["started", "ended", "started", "cpu", "ended"]
