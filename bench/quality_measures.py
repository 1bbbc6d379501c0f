"""The quality benchmark's measures, pure: node series on a time grid, hot-node-seconds, spreads over
time, and how long pods waited for a node.

A grid is node -> one value per step (NaN where Prometheus had none), all nodes on the same steps, as
`grid_of` builds it from a query_range answer.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from promsched.api.annotations import DECISION_ANNOTATION

Grid = dict[str, list[float]]

CPU_HOT = 80.0  # percent of a node's CPU: the hot node
MEMORY_HOT = 90.0


def node_of(instance: str) -> str:
    """The node a sandbox series belongs to: its `instance` label less the port."""
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance


def grid_of(result: Sequence[Mapping[str, Any]], start: float, step: float, steps: int) -> Grid:
    """A query_range matrix on the grid start + k * step (k < steps), one row per node."""
    grid: Grid = {}
    for series in result:
        labels = series["metric"]
        node = node_of(str(labels.get("instance", labels.get("node", ""))))
        row = grid.setdefault(node, [math.nan] * steps)
        for stamp, value in series["values"]:
            index = round((float(stamp) - start) / step)
            if 0 <= index < steps:
                row[index] = float(value)
    return dict(sorted(grid.items()))


def columns(grid: Grid) -> list[list[float]]:
    """The values of all nodes at each step, NaN left out."""
    rows = list(grid.values())
    steps = len(rows[0]) if rows else 0
    return [[row[k] for row in rows if not math.isnan(row[k])] for k in range(steps)]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks, as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def per_step(grid: Grid, measure: Callable[[list[float]], float]) -> list[float]:
    return [measure(column) if column else math.nan for column in columns(grid)]


def hot_nodes(grid: Grid, threshold: float) -> list[int]:
    """Nodes above `threshold` at each step."""
    return [sum(value > threshold for value in column) for column in columns(grid)]


def mean(values: Sequence[float]) -> float:
    present = [value for value in values if not math.isnan(value)]
    return statistics.fmean(present) if present else math.nan


def node_measures(cpu: Grid, memory: Grid, step: float) -> dict[str, float]:
    """The run's measures over its whole window: hot-node-seconds (steps x nodes above the threshold,
    times the step), p95 and maximum of node CPU across nodes at each step (their means over time, and
    the peak), and the standard deviation across nodes at each step, averaged over time."""
    cpu_max = per_step(cpu, max)
    return {
        "hot_cpu_node_s": step * sum(hot_nodes(cpu, CPU_HOT)),
        "hot_memory_node_s": step * sum(hot_nodes(memory, MEMORY_HOT)),
        "cpu_p95": mean(per_step(cpu, lambda column: percentile(column, 0.95))),
        "cpu_max": mean(cpu_max),
        "cpu_peak": max((value for value in cpu_max if not math.isnan(value)), default=math.nan),
        "cpu_std": mean(per_step(cpu, statistics.pstdev)),
        "memory_std": mean(per_step(memory, statistics.pstdev)),
        "cpu_mean": mean(per_step(cpu, statistics.fmean)),
        "memory_mean": mean(per_step(memory, statistics.fmean)),
    }


@dataclass
class PodLives:
    """When each pod of a run was first seen, bound (and where) and gone, in one clock's seconds; its
    workload (its `app` label) and the decision promsched annotated it with, if any."""

    first_seen: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    node: dict[str, str] = field(default_factory=dict)
    gone: dict[str, float] = field(default_factory=dict)
    workload: dict[str, str] = field(default_factory=dict)
    decision: dict[str, str] = field(default_factory=dict)

    def observe(self, kind: str, pod: Mapping[str, Any], now: float) -> None:
        metadata = pod["metadata"]
        name = str(metadata["name"])
        self.first_seen.setdefault(name, now)
        if "app" in metadata.get("labels", {}):
            self.workload[name] = str(metadata["labels"]["app"])
        if DECISION_ANNOTATION in metadata.get("annotations", {}):
            self.decision[name] = str(metadata["annotations"][DECISION_ANNOTATION])
        node = pod.get("spec", {}).get("nodeName")
        if node and name not in self.bound:
            self.bound[name] = now
            self.node[name] = str(node)
        if kind == "DELETED":
            self.gone.setdefault(name, now)

    def waits(self, end: float) -> dict[str, float]:
        """Seconds each pod waited for a node: until bound, deleted unbound, or the end of the run."""
        return {
            name: min(self.bound.get(name, end), self.gone.get(name, end), end) - seen
            for name, seen in self.first_seen.items()
            if seen <= end
        }

    def pending_at(self, end: float) -> list[str]:
        return sorted(
            name
            for name, seen in self.first_seen.items()
            if seen <= end and self.bound.get(name, math.inf) > end and self.gone.get(name, math.inf) > end
        )


def wait_measures(lives: PodLives, end: float) -> dict[str, float]:
    waits = list(lives.waits(end).values())
    pending = lives.pending_at(end)
    return {
        "pods_seen": float(len(waits)),
        "pods_bound": float(sum(at <= end for at in lives.bound.values())),
        "pending_at_end": float(len(pending)),
        "pending_at_end_wait_s": sum(end - lives.first_seen[name] for name in pending),
        "wait_total_s": sum(waits),
        "wait_mean_s": mean(waits),
        "wait_p95_s": percentile(waits, 0.95),
        "wait_max_s": max(waits, default=math.nan),
    }
