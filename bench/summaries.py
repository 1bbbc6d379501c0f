"""Repeated runs of one row as one: each figure's median, and its range (min-max) over the repeats.

`make bench` runs every row several times, interleaved (A, B, C, A, B, C, ...), so that a slow minute of
the shared machine falls on one repeat of each variant rather than on all repeats of one. A summary has
the shape of a single run, with the medians in place of the values, so the tables, ratios and targets read
it as they read a run; `range` holds each figure's minimum and maximum and `repeats` how many runs it
summarises.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from typing import Any

from bench.quality_measures import percentile

Run = dict[str, Any]

# The figures summarised by their median (dotted keys reach into nested dicts such as `spread`).
FIGURES = (
    "bound",
    "throughput",
    "span_s",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "max_ms",
    "queries_per_pod",
    "scheduler_cpu_s",
    "scheduler_cpu_ms_per_pod",
    "peak_rss_mb",
    "apiserver_cpu_s",
    "apiserver_ms_per_bind",
    "apiserver_bind_latency_ms",
    "prometheus_ms_per_pod",
    "scheduling_writes_per_pod",
    "decide_ms_mean",
    "bind_ms_mean",
    "loop_lag_p99_ms",
    "loop_lag_refresh_p99_ms",
    "spread.cpu_std",
    "spread.cpu_max",
    "spread.memory_std",
    "spread.memory_max",
    "spread.max_pods_per_node",
    "load_average_1m",
    "late_binds",
    "failed_creates",
)


def per_pod_cpu_ms(run: Run) -> float:
    """The scheduler's CPU milliseconds per pod bound (NaN when none was)."""
    bound = run.get("bound") or 0
    return 1000 * run["scheduler_cpu_s"] / bound if bound else math.nan


def figure(run: Run, key: str) -> Any:
    """The run's `key`, a dotted key reaching into nested dicts (None when absent)."""
    value: Any = run
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _put(run: Run, key: str, value: Any) -> None:
    *parents, last = key.split(".")
    for part in parents:
        run = run.setdefault(part, {})
    run[last] = value


def finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def summarise(runs: list[Run]) -> Run:
    """One row from the repeats of a variant and mode: the medians, with `range` and `repeats`. The
    latencies (for the CDF plots) are those of the repeat with the median throughput."""
    if not runs:
        raise ValueError("summarise: no runs")
    by_throughput = sorted(runs, key=lambda run: run["throughput"] if finite(run["throughput"]) else -1)
    middle = by_throughput[(len(runs) - 1) // 2]
    summary: Run = {
        key: value for key, value in middle.items() if key not in ("spread", "range", "latencies_s")
    }
    summary["spread"] = dict(middle.get("spread") or {})
    summary["latencies_s"] = middle.get("latencies_s", [])
    summary["watch_restarts"] = [reason for run in runs for reason in run.get("watch_restarts", [])]
    summary["repeats"] = len(runs)
    ranges: dict[str, list[float]] = {}
    for run in runs:
        run.setdefault("scheduler_cpu_ms_per_pod", per_pod_cpu_ms(run))
    for key in FIGURES:
        values = [value for run in runs if finite(value := figure(run, key))]
        if values:
            _put(summary, key, statistics.median(values))
            ranges[key] = [min(values), max(values)]
        elif figure(middle, key) is not None:
            _put(summary, key, math.nan)
    summary["range"] = ranges
    summary["p99_pooled_ms"] = pooled_p99_ms(runs)
    return summary


def pooled_p99_ms(runs: list[Run]) -> float:
    """The p99 of every pod's latency of `runs` together: of three runs of 500 pods it is the 15th
    slowest pod, where each run's own p99 is its 5th, so one slow spell of the machine moves it less than
    the median of the runs' p99s."""
    return 1000 * percentile([latency for run in runs for latency in run.get("latencies_s", [])], 0.99)


def rows(runs: list[Run]) -> list[Run]:
    """The summaries of `runs`, one per variant, mode and pod count, in the order each first ran."""
    groups: dict[tuple[str, str, int], list[Run]] = {}
    for run in runs:
        groups.setdefault((run["variant"], run["mode"], run["pods"]), []).append(run)
    return [summarise(group) for group in groups.values()]


def find(results: dict[str, Any], nodes: int, variant: str, mode: str) -> Run | None:
    """The variant's row at `nodes` and `mode`: the summary of its repeats."""
    for entry in results["node_counts"]:
        if entry["nodes"] == nodes:
            runs = [run for run in entry["runs"] if run["variant"] == variant and run["mode"] == mode]
            return summarise(runs) if runs else None
    return None


def all_runs(results: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Run]]:
    """Every run, repeated and extra, with its node count's entry."""
    for entry in results["node_counts"]:
        for run in [*entry["runs"], *entry.get("extra_runs", [])]:
            yield entry, run
