"""The same answers from VictoriaMetrics as from Prometheus: one sandbox runs both on the same exporters
(`launching.up(metrics=("victoriametrics", "prometheus"))`), and promsched's queries are asked of each.

VictoriaMetrics scrapes on its own schedule, so the two hold samples up to a scrape interval (2 s) apart;
on the steady profiles of tests/fixtures/profiles.yaml that moves no value. What the dialects do differ
in (rate() without extrapolation, lookbehind, quantile_over_time and subqueries at the window's edges) is
what the tolerances bound: each is the largest difference measured on this sandbox, rounded up, and
docs/metrics-backends.md gives the figures. Rankings must be the same.

The rated plugins' tolerance also covers a loaded machine (two test workers, each with a sandbox, on 2
cores): a scrape can then reach the exporter a good part of a second after the time it is stamped with,
and rates over 30 s to 10 min moved by up to 0.45 points (cpu 9.55 against 10.00). The profiles' values
lie 5 points apart or more, so the rankings still tell a dialect's error from that.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promsched.api.builtins import NODE_MIXIN_RULES
from promsched.api.policies import parse_spec
from promsched.metrics import (
    NodeDirectory,
    Plan,
    PrometheusClient,
    PrometheusEndpoint,
    Snapshot,
    plan_from_policy,
    preflight,
    take_snapshot,
)
from promsched.metrics.sustaining import sustained_values
from promsched.metrics.usage_querying import PodUsage, refresh_usage
from promsched.sandbox import launching
from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.node_metrics import monitoring
from promsched.sandbox.node_metrics.usages import ANNOTATION
from support.polling import eventually

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent.parent / "fixtures"
NODES = 6
# Past the longest window asked here (the rebalance's 10 minutes), well short of a default sandbox's
# 65 minutes: the backfill is written and imported twice.
HISTORY_SECONDS = 15 * 60.0
BACKENDS = (monitoring.VICTORIAMETRICS, monitoring.PROMETHEUS)
# Percentage points, by plugin: for the gauges a few times the largest difference measured over every plan
# here (none; docs/metrics-backends.md), for the rates what a loaded machine's late scrapes moved them
# (up to 0.45; on an idle one 0.011 cpu, 0.0073 diskIO, 0.0039 network).
TOLERANCE = {"cpu": 0.75, "memory": 0.01, "diskIO": 0.75, "diskSpace": 0.01, "network": 0.75}
# Cores and bytes of the usage estimation queries.
CPU_TOLERANCE_CORES = 0.02
BUILTINS = [
    {"name": "cpu", "weight": 3, "timeRange": "30s"},
    {"name": "memory", "weight": 2, "timeRange": "0s"},
    {"name": "diskIO", "weight": 1, "timeRange": "30s"},
    {"name": "diskSpace", "weight": 1, "timeRange": "0s"},
    {"name": "network", "weight": 1, "timeRange": "30s", "devices": ["eth0"]},
]
BY_INSTANCE = {"nodeIdentity": {"source": "Label", "label": "instance"}}
PLANS: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "mean": (BUILTINS, {}),
    "max": ([{**plugin, "timeRange": "2m", "aggregation": "max"} for plugin in BUILTINS], {}),
    "p90": ([{**plugin, "timeRange": "1m", "aggregation": "p90"} for plugin in BUILTINS], {}),
    "rules": (
        [{"name": name, "timeRange": "0s", "source": "RecordingRules"} for name in NODE_MIXIN_RULES],
        BY_INSTANCE,
    ),
    "rules-p90": (
        [
            {"name": name, "timeRange": "1m", "aggregation": "p90", "source": "RecordingRules"}
            for name in NODE_MIXIN_RULES
        ],
        BY_INSTANCE,
    ),
}
# Pods bound to nodes by name, each using what its annotation says: (node, usage).
PODS = {"steady-a": ("node-1", "cpu=800m,memory=1Gi"), "steady-b": ("node-3", "cpu=1500m,memory=512Mi")}
USAGE_WINDOW_SECONDS = 60.0


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    directory = tmp_path_factory.mktemp("victoria")
    started = launching.up(
        directory,
        nodes=NODES,
        profiles_file=FIXTURES / "profiles.yaml",
        history=HISTORY_SECONDS,
        metrics=BACKENDS,
    )
    try:
        yield started
    finally:
        launching.down(directory)


def plan_for(url: str, plugins: list[dict[str, Any]], spec: dict[str, Any]) -> Plan:
    document = {
        "schedulerName": "promsched",
        "prometheus": {"url": url, "timeout": "10s"},
        "plugins": plugins,
        **spec,
    }
    return plan_from_policy(parse_spec(document))


def both(sandbox: Sandbox, plugins: list[dict[str, Any]], spec: dict[str, Any]) -> dict[str, Snapshot]:
    """A snapshot of each backend, taken at once."""
    directory = NodeDirectory.of(sandbox.node_names)

    async def take() -> dict[str, Snapshot]:
        urls = {backend: monitoring.metrics_url(sandbox.state, backend) for backend in BACKENDS}
        clients = {
            b: PrometheusClient(PrometheusEndpoint(url, timeout_seconds=10)) for b, url in urls.items()
        }
        try:
            snapshots = await asyncio.gather(
                *(take_snapshot(plan_for(urls[b], plugins, spec), clients[b], directory) for b in BACKENDS)
            )
        finally:
            for client in clients.values():
                await client.close()
        return dict(zip(BACKENDS, snapshots, strict=True))

    return asyncio.run(take())


def ranking(values: dict[str, float]) -> list[str]:
    return sorted(values, key=lambda node: (values[node], node))


def differences(
    answers: dict[str, dict[str, dict[str, float]]], nodes: list[str], tolerance: dict[str, float]
) -> list[str]:
    """What keeps VictoriaMetrics' answers (plugin -> node -> value) from Prometheus': a node missing,
    another ranking, or a value off by more than the plugin's tolerance."""
    found = []
    victoria, prometheus = answers[monitoring.VICTORIAMETRICS], answers[monitoring.PROMETHEUS]
    for plugin, expected in prometheus.items():
        read = victoria.get(plugin, {})
        if sorted(read) != nodes or sorted(expected) != nodes:
            found.append(f"{plugin}: nodes {sorted(read)} and {sorted(expected)}")
            continue
        if ranking(read) != ranking(expected):
            found.append(f"{plugin}: ranks {ranking(read)}, Prometheus {ranking(expected)}")
        for node in nodes:
            if abs(read[node] - expected[node]) > tolerance[plugin]:
                found.append(f"{plugin} {node}: {read[node]:.4f}, Prometheus {expected[node]:.4f}")
    return found


def values(snapshot: Snapshot) -> dict[str, dict[str, float]]:
    return {
        name: {node: sample.value for node, sample in plugin.samples.items()}
        for name, plugin in snapshot.plugins.items()
    }


def percent_tolerance(name: str) -> dict[str, float]:
    # The rules' network is in bytes/s, not a percent of the 125 MB/s link.
    return {**TOLERANCE, "network": TOLERANCE["network"] * 1.25e6} if name.startswith("rules") else TOLERANCE


def test_the_preflight_passes_on_both_and_names_each_engine(sandbox: Sandbox) -> None:
    directory = NodeDirectory.of(sandbox.node_names)
    plugins, spec = PLANS["mean"]

    async def run() -> dict[str, Any]:
        reports = {}
        for backend in BACKENDS:
            url = monitoring.metrics_url(sandbox.state, backend)
            async with PrometheusClient(PrometheusEndpoint(url, timeout_seconds=10)) as client:
                reports[backend] = await preflight(plan_for(url, plugins, spec), client, directory)
        return reports

    reports = eventually(
        lambda: asyncio.run(run()),
        lambda found: all(not report.missing_series for report in found.values()),
        what="every node's series in both backends",
    )
    for backend, report in reports.items():
        assert [(query.plugin, query.ok, query.warnings) for query in report.queries] == [
            (plugin["name"], True, None) for plugin in plugins
        ], backend
    assert reports[monitoring.PROMETHEUS].engine is not None
    assert reports[monitoring.PROMETHEUS].engine.startswith("Prometheus 2.42.0")
    assert reports[monitoring.VICTORIAMETRICS].engine is not None
    assert reports[monitoring.VICTORIAMETRICS].engine.startswith("VictoriaMetrics")


@pytest.mark.parametrize("name", list(PLANS))
def test_each_builtin_ranks_the_profiled_nodes_as_prometheus_does(sandbox: Sandbox, name: str) -> None:
    plugins, spec = PLANS[name]
    nodes = sorted(sandbox.node_names)
    tolerance = percent_tolerance(name)

    def compare() -> list[str]:
        snapshots = both(sandbox, plugins, spec)
        errors = [f"{b} {p}: {e}" for b, s in snapshots.items() for p, e in s.errors.items()]
        return errors + differences({b: values(s) for b, s in snapshots.items()}, nodes, tolerance)

    # Rates read the backfilled history from the first scrape on; the recorded rules need a few
    # evaluations first.
    eventually(compare, lambda found: not found, 60, f"the {name} plugins' answers to match")


@pytest.mark.parametrize("window", [60.0, 600.0])
def test_the_rebalance_subqueries_find_the_same_sustained_loads(sandbox: Sandbox, window: float) -> None:
    nodes = sorted(sandbox.node_names)
    plugins, spec = BUILTINS, BY_INSTANCE  # the directory holds no hostnames for node_uname_info

    async def sustained() -> dict[str, dict[str, dict[str, float]]]:
        at = time.time()
        answers: dict[str, dict[str, dict[str, float]]] = {}
        for backend in BACKENDS:
            url = monitoring.metrics_url(sandbox.state, backend)
            plan = plan_for(url, plugins, spec)
            async with PrometheusClient(PrometheusEndpoint(url, timeout_seconds=10)) as client:
                directory = NodeDirectory.of(nodes)
                asked = [(plugin, False) for plugin in plan.plugins]
                answers[backend] = await sustained_values(
                    asked, client, directory, window, at=at, kept=None, stale_after=plan.stale_after_seconds
                )
        return answers

    eventually(
        lambda: differences(asyncio.run(sustained()), nodes, TOLERANCE),
        lambda found: not found,
        60,
        f"the values held over {window:.0f}s to match",
    )


def pod_manifest(name: str, node: str, usage: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": {ANNOTATION: usage}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


def pod_usage(sandbox: Sandbox) -> dict[str, PodUsage]:
    """Each backend's answer to the usage estimation queries, a little in the past (both have scraped
    up to then)."""
    at = time.time() - 2 * monitoring.SCRAPE_SECONDS

    async def read() -> dict[str, PodUsage]:
        found = {}
        for backend in BACKENDS:
            url = monitoring.metrics_url(sandbox.state, backend)
            async with PrometheusClient(PrometheusEndpoint(url, timeout_seconds=10)) as client:
                found[backend] = await refresh_usage(
                    PodUsage.empty(USAGE_WINDOW_SECONDS), client, at, lambda _name, _seconds, _error: None
                )
        return found

    return asyncio.run(read())


def usage_differences(found: dict[str, PodUsage]) -> list[str]:
    problems = [
        f"{backend}: {usage.cpu.error or usage.memory.error}"
        for backend, usage in found.items()
        if usage.cpu.error or usage.memory.error
    ]
    victoria, prometheus = found[monitoring.VICTORIAMETRICS], found[monitoring.PROMETHEUS]
    for name in PODS:
        key = ("default", name)
        cores = victoria.cpu.values.get(key), prometheus.cpu.values.get(key)
        memory = victoria.memory.values.get(key), prometheus.memory.values.get(key)
        if cores[0] is None or cores[1] is None or memory[0] is None or memory[0] != memory[1]:
            problems.append(f"{name}: cpu {cores}, memory {memory}")
        elif abs(cores[0] - cores[1]) > CPU_TOLERANCE_CORES:
            problems.append(f"{name}: cpu {cores}")
    return problems


def test_the_usage_estimation_queries_see_the_same_pods_use_the_same(sandbox: Sandbox) -> None:
    """Once the pods have run a whole estimation window: while it fills, the two backends' scrapes a
    second or two apart read a rising rate at different points."""
    manifests = [pod_manifest(name, node, usage) for name, (node, usage) in PODS.items()]
    listing = {"apiVersion": "v1", "kind": "List", "items": manifests}
    sandbox.kubectl("apply", "-f", "-", input=json.dumps(listing))
    try:
        wanted = {"steady-a": 0.8, "steady-b": 1.5}

        def filled(found: dict[str, PodUsage]) -> bool:
            cpu = found[monitoring.PROMETHEUS].cpu.values
            return all(abs(cpu.get(("default", name), 0.0) - cores) < 0.02 for name, cores in wanted.items())

        eventually(
            lambda: pod_usage(sandbox), filled, USAGE_WINDOW_SECONDS + 60, "a whole window of the pods' usage"
        )
        eventually(
            lambda: usage_differences(pod_usage(sandbox)),
            lambda found: not found,
            30,
            "both backends to answer the same usage",
        )
    finally:
        sandbox.kubectl("delete", "pod", *PODS, "-n", "default", "--wait=false", check=False)
