"""Metric snapshots with chosen loads, as a refresher would have taken them from Prometheus."""

from __future__ import annotations

import time
from collections.abc import Mapping

from promsched.metrics import PluginSnapshot, Series, Snapshot, plan_from_policy
from promsched.metrics.planning import Plan
from support.policies import policy_spec


def snapshot_of(plan: Plan, loads: Mapping[str, Mapping[str, float]], at: float) -> Snapshot:
    """A snapshot of `plan` taken at `at`, in which plugin `name` read `loads[name][node]` for each node
    (a plugin missing from `loads` read no series)."""
    plugins = {}
    for plugin in plan.plugins:
        series = {node: Series({}, value, at) for node, value in loads.get(plugin.name, {}).items()}
        plugins[plugin.name] = PluginSnapshot(plugin, plugin.samples(series), series, refreshed_at=at)
    return Snapshot(plan=plan, taken_at=at, plugins=plugins)


def cpu_snapshot(loads: Mapping[str, float]) -> Snapshot:
    """A fresh snapshot of one cpu plugin with the given busy percent per node (score 100 - load)."""
    return snapshot_of(plan_from_policy(policy_spec({"name": "cpu"})), {"cpu": loads}, time.time())
