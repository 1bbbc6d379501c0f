"""Metric snapshots with chosen loads, as a refresher would have taken them from Prometheus."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

from promsched.metrics import PluginSnapshot, Series, Snapshot, plan_from_policy
from promsched.metrics.planning import Plan
from promsched.metrics.snapshots import empty_usage
from promsched.metrics.usage_querying import PodUsage
from support.policies import policy_spec


def snapshot_of(plan: Plan, loads: Mapping[str, Mapping[str, float]], at: float) -> Snapshot:
    """A snapshot of `plan` taken at `at`, in which plugin `name` read `loads[name][node]` for each node
    (a plugin missing from `loads` read no series)."""
    plugins = {}
    for plugin in plan.plugins:
        series = {node: Series({}, value, at) for node, value in loads.get(plugin.name, {}).items()}
        plugins[plugin.name] = PluginSnapshot(plugin, plugin.samples(series), refreshed_at=at)
    return Snapshot(plan=plan, taken_at=at, plugins=plugins)


def cpu_snapshot(loads: Mapping[str, float]) -> Snapshot:
    """A fresh snapshot of one cpu plugin with the given busy percent per node (score 100 - load)."""
    return snapshot_of(plan_from_policy(policy_spec({"name": "cpu"})), {"cpu": loads}, time.time())


def with_usage(
    snapshot: Snapshot,
    cpu: Mapping[tuple[str, str], float] | None = None,
    memory: Mapping[tuple[str, str], float] | None = None,
    at: float | None = None,
) -> Snapshot:
    """`snapshot` with pods' usage as its plan's usage queries would have read it at `at` (default: when
    the snapshot was taken): cores and bytes by (namespace, pod)."""
    read_at = snapshot.taken_at if at is None else at
    usage = empty_usage(snapshot.plan)
    return dataclasses.replace(
        snapshot,
        usage=PodUsage(
            dataclasses.replace(usage.cpu, values=dict(cpu or {}), refreshed_at=read_at),
            dataclasses.replace(usage.memory, values=dict(memory or {}), refreshed_at=read_at),
        ),
    )
