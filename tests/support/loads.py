"""Sandbox nodes' loads as promsched reads them, and waiting for them to come back to their profiles.

Pods running on sandbox nodes add their usage to the nodes' metrics, and a rate keeps a deleted pod's
CPU for a window after it is gone: a test that expects the profiles' loads waits for that to pass.
"""

from __future__ import annotations

import asyncio

from promsched.api.policies import parse_spec
from promsched.metrics import (
    NodeDirectory,
    PrometheusClient,
    PrometheusEndpoint,
    plan_from_policy,
    take_snapshot,
)
from promsched.sandbox.control_plane.clusters import Sandbox
from support.polling import eventually

# Percentage points: the simulated counters are exact; a rate over a full window of 2 s scrapes
# deviates by scrape jitter only.
TOLERANCE = {"cpu": 1.5, "memory": 0.5}


def node_loads(sandbox: Sandbox, nodes: list[str], cpu_window: str = "1m") -> dict[str, dict[str, float]]:
    """Each node's CPU (over `cpu_window`) and memory load by promsched's cpu and memory plugins' own
    queries, as {node: {"cpu": ..., "memory": ...}}; a node without samples is left out."""
    spec = parse_spec(
        {
            "schedulerName": "promsched",
            "prometheus": {"url": sandbox.prometheus_url, "timeout": "10s"},
            "plugins": [{"name": "cpu", "timeRange": cpu_window}, {"name": "memory", "timeRange": "0s"}],
        }
    )

    async def read() -> dict[str, dict[str, float]]:
        endpoint = PrometheusEndpoint(sandbox.prometheus_url, timeout_seconds=10)
        async with PrometheusClient(endpoint) as client:
            snapshot = await take_snapshot(plan_from_policy(spec), client, NodeDirectory.of(nodes))
        cpu, memory = snapshot.plugins["cpu"].samples, snapshot.plugins["memory"].samples
        return {
            node: {"cpu": cpu[node].value, "memory": memory[node].value}
            for node in nodes
            if node in cpu and node in memory
        }

    return asyncio.run(read())


def off_by(loads: dict[str, dict[str, float]], expected: dict[str, dict[str, float]]) -> list[str]:
    """The loads that miss what is expected by more than TOLERANCE."""
    return [
        f"{node} {name} {loads.get(node, {}).get(name)} != {value:.2f}"
        for node, wanted in expected.items()
        for name, value in wanted.items()
        if abs(loads.get(node, {}).get(name, float("inf")) - value) > TOLERANCE[name]
    ]


def wait_for_profile_loads(sandbox: Sandbox, cpu_window: str = "1m", timeout: float = 120.0) -> None:
    """Wait until every node's CPU and memory load is its profile's again: earlier pods gone and out of
    the rate window."""
    profiles = sandbox.profiles()
    expected = {node: {"cpu": p["cpu"], "memory": p["memory"]} for node, p in profiles.items()}
    eventually(
        lambda: off_by(node_loads(sandbox, list(expected), cpu_window), expected),
        lambda misses: not misses,
        timeout,
        "nodes back at their profiles' loads",
    )
