"""The metrics layer against the sandbox's real Prometheus, its simulated node exporter, and a real
prometheus-node-exporter for this machine.

The simulated exporter serves every sandbox node with `instance="<node>:9100"` and a `node_uname_info`
naming it; its values follow `sandbox.profiles()`. Rates need two samples inside their window, and a
changed load needs one window to settle, so each check polls until it holds or its deadline passes.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
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
    score_nodes,
    take_snapshot,
)

pytestmark = pytest.mark.integration

DEADLINE_SECONDS = 120.0
LINK_SPEED_BYTES = 125_000_000  # the simulated exporter's eth0 speed
# Tolerances in percentage points; rates of simulated counters are exact up to scrape jitter.
TOLERANCE = {"cpu": 2.0, "memory": 1.0, "diskIO": 2.0, "diskSpace": 1.0, "network": 0.5}
PROFILE_KEY = {"cpu": "cpu", "memory": "memory", "diskIO": "disk_busy", "diskSpace": "disk_used"}
BUILTINS = [
    {"name": "cpu", "weight": 3, "timeRange": "30s"},
    {"name": "memory", "weight": 2, "timeRange": "0s"},
    {"name": "diskIO", "weight": 1, "timeRange": "30s"},
    {"name": "diskSpace", "weight": 1, "timeRange": "0s"},
    {"name": "network", "weight": 1, "timeRange": "30s", "devices": ["eth0"]},
]


def plan_for(sandbox: Any, *plugins: dict[str, Any], **spec: Any) -> Plan:
    document = {
        "schedulerName": "promsched",
        "prometheus": {"url": sandbox.prometheus_url, "timeout": "10s"},
        "plugins": list(plugins),
        **spec,
    }
    return plan_from_policy(parse_spec(document))


def expected_load(plugin: str, profile: dict[str, float]) -> float:
    """The value a built-in should report for a node with this profile."""
    if plugin == "network":
        return 100.0 * profile["network"] / LINK_SPEED_BYTES
    return profile[PROFILE_KEY[plugin]]


@pytest.fixture
async def client(sandbox: Any) -> AsyncIterator[PrometheusClient]:
    async with PrometheusClient(PrometheusEndpoint(sandbox.prometheus_url, timeout_seconds=10)) as prometheus:
        yield prometheus


async def poll(
    plan: Plan,
    client: PrometheusClient,
    directory: NodeDirectory,
    problems: Callable[[Snapshot], list[str] | Awaitable[list[str]]],
) -> Snapshot:
    """Snapshots every second until `problems` (which may query too) finds none; fails with the last ones
    at the deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        snapshot = await take_snapshot(plan, client, directory)
        found_now = problems(snapshot)
        if inspect.isawaitable(found_now):
            found_now = await found_now
        found = [f"{name}: {error}" for name, error in snapshot.errors.items()] + found_now
        if not found:
            return snapshot
        if time.monotonic() > deadline:
            pytest.fail(f"after {DEADLINE_SECONDS:.0f}s:\n" + "\n".join(found[:30]))
        await asyncio.sleep(1.0)


def mismatches(snapshot: Snapshot, profiles: dict[str, dict[str, float]], nodes: list[str]) -> list[str]:
    found = []
    for plugin, tolerance in TOLERANCE.items():
        samples = snapshot.plugins[plugin].samples
        for node in nodes:
            expected = expected_load(plugin, profiles[node])
            sample = samples.get(node)
            if sample is None or abs(sample.value - expected) > tolerance:
                found.append(f"{plugin} {node}: {None if sample is None else sample.value} != {expected:.3f}")
    return found


async def test_builtins_match_the_node_profiles_and_rank_nodes(
    sandbox: Any, client: PrometheusClient
) -> None:
    nodes = list(sandbox.node_names)
    profiles = sandbox.profiles()
    plan = plan_for(sandbox, *BUILTINS)
    snapshot = await poll(plan, client, NodeDirectory.of(nodes), lambda s: mismatches(s, profiles, nodes))

    for plugin, tolerance in TOLERANCE.items():
        samples = snapshot.plugins[plugin].samples
        assert samples[nodes[0]].sample_time == pytest.approx(snapshot.taken_at)
        for low in nodes:
            for high in nodes:
                if expected_load(plugin, profiles[low]) + 2 * tolerance < expected_load(
                    plugin, profiles[high]
                ):
                    assert samples[low].score > samples[high].score, (plugin, low, high)
        assert snapshot.plugins[plugin].report.duplicate_nodes == ()

    results = {result.node: result for result in score_nodes(snapshot, nodes)}
    assert all(result.feasible and 0 <= result.total <= 100 for result in results.values())


async def test_the_node_mixin_rules_give_the_builtins_their_loads(
    sandbox: Any, client: PrometheusClient
) -> None:
    """source RecordingRules reads the rules the sandbox's Prometheus records (instance = node name, as
    kube-prometheus relabels it). Their rates span 5 minutes, and the session's other tests change loads,
    so each is compared with node_exporter's own series over 5 minutes, at the same moment."""
    nodes = list(sandbox.node_names)
    by_name = {"nodeIdentity": {"source": "Label", "label": "instance"}}
    recorded = [
        {"name": name, "timeRange": "0s", "source": "RecordingRules"}
        for name in ("cpu", "memory", "diskIO", "network")
    ]
    raw = [
        {"name": "cpu", "timeRange": "5m"},
        {"name": "memory", "timeRange": "0s"},
        {"name": "diskIO", "timeRange": "5m"},
        {"name": "network", "timeRange": "5m", "devices": ["eth0"]},
    ]
    rules_plan, raw_plan = plan_for(sandbox, *recorded, **by_name), plan_for(sandbox, *raw, **by_name)
    directory = NodeDirectory.of(nodes)

    async def differences(snapshot: Snapshot) -> list[str]:
        raw_snapshot = await take_snapshot(raw_plan, client, directory)
        found = [f"raw {name}: {error}" for name, error in raw_snapshot.errors.items()]
        for plugin in ("cpu", "memory", "diskIO", "network"):
            read, expected = snapshot.plugins[plugin].samples, raw_snapshot.plugins[plugin].samples
            for node in nodes:
                if node not in read or node not in expected:
                    found.append(f"{plugin} {node}: no sample")
                    continue
                value = read[node].value
                if plugin == "network":  # bytes/s, not a percent of the link
                    value = 100.0 * value / LINK_SPEED_BYTES
                if abs(value - expected[node].value) > TOLERANCE[plugin]:
                    found.append(f"{plugin} {node}: {value} != {expected[node].value}")
        return found

    snapshot = await poll(rules_plan, client, directory, differences)
    for name, plugin_snapshot in snapshot.plugins.items():
        assert all(rule in plugin_snapshot.plugin.query for rule in NODE_MIXIN_RULES[name]), name
        assert plugin_snapshot.report.clean, (name, plugin_snapshot.report)
    network = snapshot.plugins["network"].samples
    assert all(not sample.is_load_percent for sample in network.values())


async def test_a_changed_load_moves_the_node_past_its_threshold(
    sandbox: Any, client: PrometheusClient
) -> None:
    busy, idle = sandbox.node_names[:2]
    saved = sandbox.profiles()
    plan = plan_for(sandbox, {"name": "cpu", "timeRange": "10s", "threshold": 85})
    directory = NodeDirectory.of([busy, idle])

    def settled(snapshot: Snapshot) -> list[str]:
        samples = snapshot.plugins["cpu"].samples
        found = []
        for node, load in ((busy, 95.0), (idle, 5.0)):
            sample = samples.get(node)
            if sample is None or abs(sample.value - load) > 2:
                found.append(f"cpu {node}: {None if sample is None else sample.value} != {load}")
        return found

    sandbox.set_load(busy, cpu=95.0)
    sandbox.set_load(idle, cpu=5.0)
    try:
        snapshot = await poll(plan, client, directory, settled)
    finally:
        for node in (busy, idle):
            sandbox.set_load(node, cpu=saved[node]["cpu"])
    results = {result.node: result for result in score_nodes(snapshot, [busy, idle])}
    assert results[idle].feasible
    assert results[idle].total > results[busy].total
    [(key, detail)] = results[busy].reasons
    assert key == "cpu load above 85%"
    assert detail.startswith(f"{busy} cpu load 9")


async def test_custom_queries(sandbox: Any, client: PrometheusClient) -> None:
    nodes = list(sandbox.node_names)
    profiles = sandbox.profiles()
    free = "100 * node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes"
    plan = plan_for(
        sandbox,
        # joined through node_uname_info, as the policy's identity says
        {"name": "memFree", "query": f"avg by (instance) ({free})", "higherIsBetter": True},
        # naming its own node label
        {
            "name": "memFreeByNode",
            "query": f'label_replace({free}, "node", "$1", "instance", "(.*):9100")',
            "nodeLabel": "node",
            "normalization": {"type": "Absolute", "min": 0, "max": 100},
            "higherIsBetter": True,
        },
    )

    def wrong(snapshot: Snapshot) -> list[str]:
        found = []
        for plugin in ("memFree", "memFreeByNode"):
            samples = snapshot.plugins[plugin].samples
            for node in nodes:
                expected = 100 - profiles[node]["memory"]
                if node not in samples or abs(samples[node].value - expected) > 1:
                    found.append(f"{plugin} {node}: {samples.get(node)} != {expected}")
        return found

    snapshot = await poll(plan, client, NodeDirectory.of(nodes), wrong)
    by_node = snapshot.plugins["memFreeByNode"].samples
    for node in nodes:
        assert by_node[node].score == pytest.approx(by_node[node].value)


async def test_preflight_reports_missing_nodes_and_bad_queries(
    sandbox: Any, client: PrometheusClient
) -> None:
    served = list(sandbox.node_names)
    builtins = plan_for(sandbox, *BUILTINS)

    def unready(snapshot: Snapshot) -> list[str]:
        return [
            f"{name}: no {node}"
            for name, p in snapshot.plugins.items()
            for node in served
            if node not in p.samples
        ]

    await poll(builtins, client, NodeDirectory.of(served), unready)  # rates have their samples by now

    plan = plan_for(sandbox, *BUILTINS, {"name": "broken", "query": "sum by (instance) (node_load1"})
    report = await preflight(plan, client, NodeDirectory.of([*served, "node-not-served"]))

    outcome = {query.plugin: (query.ok, query.error) for query in report.queries}
    assert {plugin: ok for plugin, (ok, _) in outcome.items()} == {
        **{plugin["name"]: True for plugin in BUILTINS},
        "broken": False,
    }
    broken_error = outcome["broken"][1]
    assert broken_error is not None
    assert broken_error.startswith("bad_data:")
    assert "parse error" in broken_error
    missing = {item.plugin: (item.nodes, item.count) for item in report.missing_series}
    assert missing == {plugin["name"]: (["node-not-served"], 1) for plugin in BUILTINS}


async def test_each_builtins_p90_runs_on_the_real_prometheus(sandbox: Any, client: PrometheusClient) -> None:
    """p90 from node_exporter's series (subqueries over 1m rates, for counters) matches the steady
    profiles as the mean does; from the node mixin's rules it gives every node a value. Preflight, which
    the operator runs on every policy change, reports each query as working."""
    nodes = list(sandbox.node_names)
    profiles = sandbox.profiles()
    directory = NodeDirectory.of(nodes)
    by_name = {"nodeIdentity": {"source": "Label", "label": "instance"}}
    raw = plan_for(sandbox, *({**plugin, "timeRange": "1m", "aggregation": "p90"} for plugin in BUILTINS))
    recorded = plan_for(
        sandbox,
        *(
            {"name": name, "timeRange": "1m", "aggregation": "p90", "source": "RecordingRules"}
            for name in NODE_MIXIN_RULES
        ),
        **by_name,
    )

    await poll(raw, client, directory, lambda snapshot: mismatches(snapshot, profiles, nodes))

    def unread(snapshot: Snapshot) -> list[str]:
        return [
            f"{name}: no {node}"
            for name, p in snapshot.plugins.items()
            for node in nodes
            if node not in p.samples
        ]

    await poll(recorded, client, directory, unread)
    for plan in (raw, recorded):
        report = await preflight(plan, client, directory)
        assert [(query.ok, query.aggregation) for query in report.queries] == [(True, "p90")] * len(
            plan.plugins
        )
        # memory and diskSpace take the p10 of the available bytes, which is the p90 of their use.
        assert all(query.query.count("quantile_over_time(") == 1 for query in report.queries)


@pytest.mark.parametrize("source", ["Label", "InternalIP", "UnameNodename"])
async def test_the_real_node_exporter_works_with_the_builtins(
    sandbox: Any, client: PrometheusClient, source: str
) -> None:
    # Its instance is an address ("127.0.0.1:<port>"): under Label the node is named by that address,
    # under InternalIP the address maps to a name we choose, under UnameNodename it is this host's name.
    directories = {
        "Label": ("127.0.0.1", NodeDirectory.of(["127.0.0.1"])),
        "InternalIP": ("this-machine", NodeDirectory.of(["this-machine"], {"127.0.0.1": "this-machine"})),
        "UnameNodename": (os.uname().nodename, NodeDirectory.of([os.uname().nodename])),
    }
    node, directory = directories[source]
    identity = {"source": source} if source == "UnameNodename" else {"source": source, "label": "instance"}
    builtins = [{**plugin, "timeRange": "1m"} for plugin in BUILTINS]
    builtins[-1] = {"name": "network", "timeRange": "1m"}  # this machine's devices: every one but lo
    plan = plan_for(sandbox, *builtins, nodeIdentity=identity)

    def incomplete(snapshot: Snapshot) -> list[str]:
        # cpu and memory exist on every machine; disks, filesystems and link speeds depend on it.
        return [
            f"no {plugin} for {node}"
            for plugin in ("cpu", "memory")
            if node not in snapshot.plugins[plugin].samples
        ]

    snapshot = await poll(plan, client, directory, incomplete)
    for name, plugin in snapshot.plugins.items():
        assert plugin.error is None, name
        assert plugin.report.duplicate_nodes == (), name
        sample = plugin.samples.get(node)
        if sample is not None:
            assert 0 <= sample.score <= 100, (name, sample)
            assert sample.value >= 0, (name, sample)
    assert 0 < snapshot.plugins["memory"].samples[node].value < 100
