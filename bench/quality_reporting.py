"""`bench.quality`'s results as OUT/quality.json, a markdown report (OUT/quality.md) and plots
(OUT/quality-heatmap.png, OUT/quality-hot-nodes.png)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from bench.plotting import MISSING, pyplot, save
from bench.quality_estimates import estimation_table
from bench.quality_measures import CPU_HOT, MEMORY_HOT, hot_nodes
from bench.quality_outage import outage_rows
from bench.quality_trace import Trace
from bench.tables import ratio, shown, table, value
from bench.targets import target
from bench.trace_benches import Output

KUBE = "ks-default"
PROMSCHED = "promsched"
PROMSCHED_PLAIN = "promsched-noest"
TRIMARANS = ("trimaran-tlp", "trimaran-lvrb")

# (label, key, format): the rows of the side-by-side table.
ROWS: tuple[tuple[str, str, str], ...] = (
    (f"hot-node-seconds, CPU above {CPU_HOT:g}%", "hot_cpu_node_s", "{:.0f}"),
    (f"hot-node-seconds, memory above {MEMORY_HOT:g}%", "hot_memory_node_s", "{:.0f}"),
    ("p95 node CPU across nodes, mean over time, %", "cpu_p95", "{:.1f}"),
    ("max node CPU across nodes, mean over time, %", "cpu_max", "{:.1f}"),
    ("max node CPU, peak, %", "cpu_peak", "{:.1f}"),
    ("std of node CPU across nodes, mean over time", "cpu_std", "{:.2f}"),
    ("std of node memory across nodes, mean over time", "memory_std", "{:.2f}"),
    ("mean node CPU, %", "cpu_mean", "{:.1f}"),
    ("pods bound", "pods_bound", "{:.0f}"),
    ("pods left pending at the end", "pending_at_end", "{:.0f}"),
    ("their waiting time so far, pod-s", "pending_at_end_wait_s", "{:.0f}"),
    ("waiting for a node, all pods, pod-s", "wait_total_s", "{:.0f}"),
    ("waiting for a node, mean, s", "wait_mean_s", "{:.2f}"),
    ("waiting for a node, p95, s", "wait_p95_s", "{:.2f}"),
    ("waiting for a node, max, s", "wait_max_s", "{:.1f}"),
    ("Prometheus queries per scheduled pod", "queries_per_pod", "{:.2f}"),
)

ESTIMATION_NOTE = (
    "Each pod promsched placed with an estimate (its promsched.io/decision annotation) against what it "
    "used (its usage annotation, which the sandbox applies from start to end), by the estimate's source; "
    "Koordinator's rule (85% cpu, 70% memory of the limit, else the request) on the same pods."
)


def trace_summary(trace: Trace) -> dict[str, Any]:
    """The trace's shape: workloads, pods, requests at the end, and the spread of usage / request."""
    end = trace.duration_s
    cpu_share, memory_share = trace.requested_share_at(end)
    ratios = sorted(w.cpu_ratio for w in trace.workloads for _ in range(max(r for _, r in w.sizes)))
    memory = [w.usage.memory_bytes / w.memory_request_bytes for w in trace.workloads]
    return {
        "services": sum(w.kind == "service" for w in trace.workloads),
        "batch_jobs": sum(w.kind == "batch" for w in trace.workloads),
        "pods": trace.pods(),
        "events": len(trace.events),
        "duration_s": end,
        "cpu_requested_at_end": cpu_share,
        "memory_requested_at_end": memory_share,
        "pods_cpu_ratio_below_0_4": sum(r < 0.4 for r in ratios) / len(ratios) if ratios else math.nan,
        "pods_cpu_ratio_above_1_5": sum(r >= 1.5 for r in ratios) / len(ratios) if ratios else math.nan,
        "cpu_ratio_median": statistics.median(ratios) if ratios else math.nan,
        "memory_ratio_range": [min(memory, default=math.nan), max(memory, default=math.nan)],
    }


def _runs(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["variant"]: run for run in results.get("runs", [])}


def better_trimaran(results: dict[str, Any]) -> dict[str, Any] | None:
    """The Trimaran plugin with fewer CPU hot-node-seconds, if either ran."""
    runs = _runs(results)
    found = [runs[key] for key in TRIMARANS if key in runs]
    return min(found, key=lambda run: value(run, ("hot_cpu_node_s",))) if found else None


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, reported, not asserted."""
    runs = _runs(results)
    ours, kube, plain = runs.get(PROMSCHED), runs.get(KUBE), runs.get(PROMSCHED_PLAIN)
    trimaran = better_trimaran(results)
    found = []

    def of(run: dict[str, Any] | None, key: str) -> float:
        return value(run, (key,)) if run else math.nan

    hot, hot_kube = of(ours, "hot_cpu_node_s"), of(kube, "hot_cpu_node_s")
    known = math.isfinite(hot) and math.isfinite(hot_kube)
    found.append(
        target(
            "CPU hot-node-seconds <= 0.5x kube-scheduler's",
            f"{hot:.0f} vs {hot_kube:.0f}" if known else "-",
            hot <= 0.5 * hot_kube if known else None,
        )
    )
    hot_trimaran = of(trimaran, "hot_cpu_node_s")
    found.append(
        target(
            "CPU hot-node-seconds below the better Trimaran plugin's",
            f"{hot:.0f} vs {hot_trimaran:.0f} ({trimaran['label']})" if trimaran else "-",
            hot < hot_trimaran if trimaran and math.isfinite(hot) else None,
        )
    )
    std, std_kube = of(ours, "cpu_std"), of(kube, "cpu_std")
    known = math.isfinite(std) and math.isfinite(std_kube)
    found.append(
        target(
            "time-averaged CPU std <= 0.7x kube-scheduler's",
            f"{std:.2f} vs {std_kube:.2f} (x{ratio(std, std_kube):.2f})" if known else "-",
            std <= 0.7 * std_kube if known else None,
        )
    )
    # Mean wait per pod; sub-second waits are the watch's and the API server's timing, so 1 s is the
    # least difference counted.
    wait, wait_kube = of(ours, "wait_mean_s"), of(kube, "wait_mean_s")
    known = math.isfinite(wait) and math.isfinite(wait_kube)
    found.append(
        target(
            "pending time no worse than kube-scheduler's by more than 10% (mean wait; 1 s at least)",
            f"{wait:.2f} s vs {wait_kube:.2f} s" if known else "-",
            wait <= max(1.1 * wait_kube, wait_kube + 1.0) if known else None,
        )
    )
    hot_plain = of(plain, "hot_cpu_node_s")
    known = math.isfinite(hot) and math.isfinite(hot_plain)
    found.append(
        target(
            "estimation on: fewer CPU hot-node-seconds than off",
            f"{hot:.0f} vs {hot_plain:.0f}" if known else "-",
            hot < hot_plain if known else None,
        )
    )
    return found


def markdown(results: dict[str, Any]) -> str:
    runs = results.get("runs", [])
    by_key = _runs(results)
    kube, trimaran = by_key.get(KUBE), better_trimaran(results)
    trace = results["trace"]
    settings = results["settings"]["trace"]
    lines = [
        f"# Placement quality: {settings['nodes']} nodes, {settings['minutes']:g} minutes of trace",
        "",
        f"Trace (seed {settings['seed']}): {trace['services']} services, {trace['batch_jobs']} batch jobs, "
        f"{trace['pods']} pods; {100 * trace['cpu_requested_at_end']:.0f}% of the cluster's CPU and "
        f"{100 * trace['memory_requested_at_end']:.0f}% of its memory requested at the end; "
        f"{100 * trace['pods_cpu_ratio_below_0_4']:.0f}% of pods use under 40% of their CPU request, "
        f"{100 * trace['pods_cpu_ratio_above_1_5']:.0f}% use 150% or more. "
        f"Sandbox {results.get('kubernetes', '?')}, commit {results['revision']['commit'][:7]}"
        + (" (with uncommitted changes under operator/)" if results["revision"]["changed"] else "")
        + f", {results['machine']['cpus']} CPUs, wall {results.get('wall_s', math.nan) / 60:.0f} min.",
        "",
    ]
    ours = by_key.get(PROMSCHED)
    candidates = [("kube-scheduler", kube), ("better Trimaran", trimaran)]
    compared = [(name, other) for name, other in candidates if other is not None and ours is not None]
    header = ["", *(run["label"] for run in runs), *(f"promsched / {name}" for name, _ in compared)]
    rows = []
    for label, key, template in ROWS:
        cells = [label, *(shown(template, value(run, (key,))) for run in runs)]
        cells += [shown("{:.2f}", ratio(value(ours, (key,)), value(other, (key,)))) for _, other in compared]
        rows.append(cells)
    lines += table(header, rows)
    if any("outage" in run for run in runs):
        window = results["settings"].get("outage", {})
        lines += ["", f"## Prometheus outage ({window.get('span_s', math.nan):.0f} s mid-trace)", ""]
        lines += outage_rows([(settings["seed"], run) for run in runs])
    estimation = estimation_table(runs)
    if estimation:
        lines += ["", "## Estimation error", "", ESTIMATION_NOTE, "", *estimation]
    lines += ["", "## Targets", ""]
    for found in targets(results):
        lines.append(f"- {found['status']}: {found['target']} ({found['value']})")
    for run in runs:
        if "trimaran_nodes_scored_from_metrics" in run:
            lines.append(
                f"\n{run['label']}: scored {run['trimaran_nodes_scored_from_metrics']} of "
                f"{settings['nodes']} nodes from their metrics; {run['trimaran_metrics_failures']} metric "
                "failures in its log."
            )
    problems = [f"{run['label']}: {len(run['errors'])} failed requests" for run in runs if run.get("errors")]
    if problems:
        lines += ["", "Replay errors: " + "; ".join(problems) + "."]
    return "\n".join(lines) + "\n"


def plots(results: dict[str, Any], out: Path) -> list[str]:
    plt = pyplot()
    if plt is None:
        return [f"{MISSING}: no plots"]
    runs = results.get("runs", [])
    if not runs:
        return []
    step = results["settings"]["step"]
    background = results["background"]
    # Nodes sorted by their background CPU, coolest at the bottom, so the skew shows as a gradient.
    nodes = sorted(background, key=lambda node: background[node]["cpu"])
    figure, axes = plt.subplots(
        1, len(runs), figsize=(3.6 * len(runs) + 1.5, 5), sharey=True, squeeze=False, layout="constrained"
    )
    image = None
    for axis, run in zip(axes[0], runs, strict=True):
        grid = run["cpu_grid"]
        rows = [[math.nan if v is None else v for v in grid.get(node, [])] for node in nodes]
        width = max((len(row) for row in rows), default=0)
        rows = [row + [math.nan] * (width - len(row)) for row in rows]
        image = axis.imshow(
            rows,
            aspect="auto",
            origin="lower",
            cmap="inferno",
            vmin=0,
            vmax=100,
            extent=(0, width * step / 60, 0, len(nodes)),
        )
        axis.set_title(run["label"], fontsize=9)
        axis.set_xlabel("minutes")
    axes[0][0].set_ylabel("nodes, by background CPU")
    if image is not None:
        figure.colorbar(image, ax=axes[0].tolist(), label="node CPU %")
    written = [save(plt, figure, out / "quality-heatmap.png", tight=False)]
    figure, axis = plt.subplots(figsize=(8, 4))
    for run in runs:
        grid = {node: [math.nan if v is None else v for v in row] for node, row in run["cpu_grid"].items()}
        counts = hot_nodes(grid, CPU_HOT)
        axis.step([k * step / 60 for k in range(len(counts))], counts, where="post", label=run["label"])
    axis.set_xlabel("minutes")
    axis.set_ylabel(f"nodes above {CPU_HOT:g}% CPU")
    axis.legend(fontsize=8)
    return [*written, save(plt, figure, out / "quality-hot-nodes.png")]


# quality.json (with the targets), quality.md and the plots.
OUTPUT = Output("quality", "targets", targets, markdown, plots)
