"""`make bench`'s targets (issues 8 and 21), read from the medians of the repeats: each with the value
measured and whether it is met."""

from __future__ import annotations

import math
from typing import Any

from bench.summaries import all_runs, find, finite
from bench.variants import LABELS

KUBE_SCHEDULERS = ("ks-default", "ks-raised")
QUERY_TARGET = 0.05
# Issue 21: peak RSS at most 150 MB with 5000 pods and 200 MB with 10,000, on 1000 nodes; CPU per pod at
# most half of kube-scheduler's (QPS raised) at these node counts.
RSS_TARGETS = ((5000, 150.0), (10000, 200.0))
RSS_TARGET_NODES = 1000
CPU_TARGET_RATIO = 0.5
CPU_TARGET_NODES = (1000, 5000)


def target(name: str, value: str, met: bool | None) -> dict[str, Any]:
    """A target as the reports list it: its name, the value measured and whether it is met (None: not
    measured)."""
    return {
        "target": name,
        "value": value,
        "status": "not measured" if met is None else ("met" if met else "NOT met"),
    }


def _ratio_target(
    results: dict[str, Any], nodes: int, mode: str, key: str, name: str, bound: float, fmt: str
) -> dict[str, Any]:
    """promsched's median `key` over kube-scheduler's (QPS raised) at `nodes`, against `bound`: at most
    it when `bound` < 1 or for latencies and CPU, at least it for throughput."""
    ours, theirs = find(results, nodes, "promsched", mode), find(results, nodes, "ks-raised", mode)
    if not ours or not theirs or not finite(ours[key]) or not finite(theirs[key]) or not theirs[key]:
        return target(name, "-", None)
    ratio = ours[key] / theirs[key]
    met = ratio >= bound if key == "throughput" else ratio <= bound
    value = f"{fmt.format(ours[key])} vs {fmt.format(theirs[key])} (x{ratio:.2f}, medians)"
    return target(name, value, met)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of issues 8 and 21 with the measured value (medians of the repeats) and whether it is
    met (None: not measured)."""
    found: list[dict[str, Any]] = []
    rate = results["settings"]["rate"]
    raised = LABELS["ks-raised"]
    for nodes in CPU_TARGET_NODES:
        found.append(
            _ratio_target(
                results,
                nodes,
                "burst",
                "scheduler_cpu_ms_per_pod",
                f"{nodes} nodes, burst: scheduler CPU per pod <= {CPU_TARGET_RATIO}x {raised}'s",
                CPU_TARGET_RATIO,
                "{:.2f} ms",
            )
        )
        found.append(
            _ratio_target(
                results,
                nodes,
                "burst",
                "throughput",
                f"{nodes} nodes: burst throughput >= {raised}'s",
                1.0,
                "{:.1f} pods/s",
            )
        )
        name = f"{nodes} nodes: p99 creation-to-bind at {rate:g} pods/s <= {raised}'s"
        found.append(_ratio_target(results, nodes, "rate", "p99_ms", name, 1.0, "{:.0f} ms"))
    ours_all = [(entry["nodes"], run) for entry, run in all_runs(results) if run["variant"] == "promsched"]
    if ours_all:
        worst_nodes, worst = max(ours_all, key=lambda item: _nan_low(item[1]["queries_per_pod"]))
        found.append(
            target(
                f"<= {QUERY_TARGET} Prometheus queries per scheduled pod (every promsched run)",
                f"worst {worst['queries_per_pod']:.4f} ({worst_nodes} nodes, {worst['mode']}, "
                f"{worst['pods']} pods)",
                all(
                    finite(r["queries_per_pod"]) and r["queries_per_pod"] <= QUERY_TARGET for _, r in ours_all
                ),
            )
        )
    for pods, limit in RSS_TARGETS:
        rss_runs = [
            run
            for nodes, run in ours_all
            if nodes == RSS_TARGET_NODES and run["pods"] == pods and run["bound"] >= pods
        ]
        name = f"Peak RSS <= {limit:.0f} MB at {RSS_TARGET_NODES} nodes and {pods} pods"
        if rss_runs:
            rss = max(run["peak_rss_mb"] for run in rss_runs)
            found.append(target(name, f"{rss:.0f} MB", rss <= limit))
        else:
            found.append(target(name, "-", None))
    pairs = []
    for entry in results["node_counts"]:
        for mode in ("rate", "burst"):
            mine = find(results, entry["nodes"], "promsched", mode)
            if mine is None:
                continue
            for key in KUBE_SCHEDULERS:
                theirs = find(results, entry["nodes"], key, mode)
                if theirs is not None:
                    pairs.append((entry["nodes"], mode, key, mine["spread"], theirs["spread"]))
    if pairs:
        lower = [
            ours_spread["cpu_std"] < theirs_spread["cpu_std"]
            and ours_spread["memory_std"] < theirs_spread["memory_std"]
            for _, _, _, ours_spread, theirs_spread in pairs
        ]
        closest = max(pairs, key=lambda p: p[3]["cpu_std"] / p[4]["cpu_std"] if p[4]["cpu_std"] else math.inf)
        found.append(
            target(
                "Utilisation spread (std of CPU and memory) lower than kube-scheduler's in every row",
                f"{sum(lower)}/{len(lower)} rows lower; closest: {closest[0]} nodes {closest[1]} vs "
                f"{closest[2]}: CPU std {closest[3]['cpu_std']:.2f} vs {closest[4]['cpu_std']:.2f}",
                all(lower),
            )
        )
    return found


def _nan_low(value: Any) -> float:
    return float(value) if finite(value) else -math.inf
