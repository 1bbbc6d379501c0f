"""The benchmark's results as targets met or not, a markdown report, PNG plots and a profile summary."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import summaries

Run = dict[str, Any]

LABELS = {
    "promsched": "promsched (QPS 1000/2000)",
    "ks-default": "kube-scheduler (QPS 50/100)",
    "ks-raised": "kube-scheduler (QPS 1000/2000)",
    "null": "null binder",
}
KUBE_SCHEDULERS = ("ks-default", "ks-raised")
QUERY_TARGET = 0.05
# Issue 21: peak RSS at most 150 MB with 5000 pods and 200 MB with 10,000, on 1000 nodes; CPU per pod at
# most half of kube-scheduler's (QPS raised) at these node counts.
RSS_TARGETS = ((5000, 150.0), (10000, 200.0))
RSS_TARGET_NODES = 1000
CPU_TARGET_RATIO = 0.5
CPU_TARGET_NODES = (1000, 5000)


def _find(results: dict[str, Any], nodes: int, variant: str, mode: str) -> Run | None:
    """The variant's row at `nodes` and `mode`: the medians of its repeats (see `summaries`)."""
    for entry in results["node_counts"]:
        if entry["nodes"] == nodes:
            runs = [run for run in entry["runs"] if run["variant"] == variant and run["mode"] == mode]
            return summaries.summarise(runs) if runs else None
    return None


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _target(name: str, value: str, met: bool | None) -> dict[str, Any]:
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
    ours, theirs = _find(results, nodes, "promsched", mode), _find(results, nodes, "ks-raised", mode)
    if not ours or not theirs or not _finite(ours[key]) or not _finite(theirs[key]) or not theirs[key]:
        return _target(name, "-", None)
    ratio = ours[key] / theirs[key]
    met = ratio >= bound if key == "throughput" else ratio <= bound
    value = f"{fmt.format(ours[key])} vs {fmt.format(theirs[key])} (x{ratio:.2f}, medians)"
    return _target(name, value, met)


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
    ours_all = [(entry["nodes"], run) for entry, run in _all_runs(results) if run["variant"] == "promsched"]
    if ours_all:
        worst_nodes, worst = max(ours_all, key=lambda item: _nan_low(item[1]["queries_per_pod"]))
        found.append(
            _target(
                f"<= {QUERY_TARGET} Prometheus queries per scheduled pod (every promsched run)",
                f"worst {worst['queries_per_pod']:.4f} ({worst_nodes} nodes, {worst['mode']}, "
                f"{worst['pods']} pods)",
                all(
                    _finite(r["queries_per_pod"]) and r["queries_per_pod"] <= QUERY_TARGET
                    for _, r in ours_all
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
            found.append(_target(name, f"{rss:.0f} MB", rss <= limit))
        else:
            found.append(_target(name, "-", None))
    pairs = []
    for entry in results["node_counts"]:
        for mode in ("rate", "burst"):
            mine = _find(results, entry["nodes"], "promsched", mode)
            if mine is None:
                continue
            for key in KUBE_SCHEDULERS:
                theirs = _find(results, entry["nodes"], key, mode)
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
            _target(
                "Utilisation spread (std of CPU and memory) lower than kube-scheduler's in every row",
                f"{sum(lower)}/{len(lower)} rows lower; closest: {closest[0]} nodes {closest[1]} vs "
                f"{closest[2]}: CPU std {closest[3]['cpu_std']:.2f} vs {closest[4]['cpu_std']:.2f}",
                all(lower),
            )
        )
    return found


def _nan_low(value: Any) -> float:
    return float(value) if _finite(value) else -math.inf


def _all_runs(results: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Run]]:
    for entry in results["node_counts"]:
        for run in [*entry["runs"], *entry.get("extra_runs", [])]:
            yield entry, run


# ----- markdown -----------------------------------------------------------------------------------------

COLUMNS = (
    ("Bound", "bound", "{:.0f}"),
    ("Throughput (pods/s)", "throughput", "{:.1f}"),
    ("p50 (ms)", "p50_ms", "{:.0f}"),
    ("p90 (ms)", "p90_ms", "{:.0f}"),
    ("p99 (ms)", "p99_ms", "{:.0f}"),
    ("Prom queries/pod", "queries_per_pod", "{:.4f}"),
    ("Sched CPU (s)", "scheduler_cpu_s", "{:.2f}"),
    ("Sched CPU/pod (ms)", "scheduler_cpu_ms_per_pod", "{:.2f}"),
    ("Peak RSS (MB)", "peak_rss_mb", "{:.0f}"),
    ("API server CPU/bind (ms)", "apiserver_ms_per_bind", "{:.2f}"),
    ("Sched writes/pod", "scheduling_writes_per_pod", "{:.2f}"),
    ("CPU util std (%)", "spread.cpu_std", "{:.2f}"),
    ("CPU util max (%)", "spread.cpu_max", "{:.1f}"),
    ("Mem util std (%)", "spread.memory_std", "{:.2f}"),
    ("Mem util max (%)", "spread.memory_max", "{:.1f}"),
)
# Ratios are shown for these columns only: the others are counts or zero for every other variant.
RATIO_KEYS = {
    "throughput",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "scheduler_cpu_s",
    "scheduler_cpu_ms_per_pod",
    "peak_rss_mb",
    "apiserver_ms_per_bind",
    "scheduling_writes_per_pod",
    "spread.cpu_std",
    "spread.cpu_max",
    "spread.memory_std",
    "spread.memory_max",
}


def _value(run: Run, key: str) -> Any:
    value: Any = run
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _cell(run: Run, key: str, pattern: str) -> str:
    """The value; for a summary of several repeats, the median and its range."""
    value = _value(run, key)
    if not _finite(value):
        return "-"
    low, high = run.get("range", {}).get(key, (value, value))
    shown = pattern.format(value)
    if run.get("repeats", 1) > 1 and pattern.format(low) != pattern.format(high):
        shown += f" ({pattern.format(low)}-{pattern.format(high)})"
    return shown


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(runs: list[Run], ratios: list[tuple[str, Run, Run]]) -> list[str]:
    header = ["Variant", "Mode", "Pods", *(title for title, _, _ in COLUMNS)]
    lines = [_row(header), _row(["---"] * len(header))]
    for run in runs:
        mode = run["mode"] + (" (py-spy)" if run.get("profiled") else "")
        lines.append(
            _row([run["label"], mode, str(run["pods"]), *(_cell(run, key, fmt) for _, key, fmt in COLUMNS)])
        )
    for title, mine, theirs in ratios:
        cells = []
        for _, key, _fmt in COLUMNS:
            a, b = _value(mine, key), _value(theirs, key)
            cells.append(f"x{a / b:.2f}" if key in RATIO_KEYS and _finite(a) and _finite(b) and b else "")
        lines.append(_row([f"*{title}*", mine["mode"], "", *cells]))
    return lines


def _writes_per_pod(rows: list[Run]) -> list[str]:
    """Each row's writes per bound pod by kind (its median-throughput repeat), from the API server's own
    counts: the schedulers' bindings, events and conditions, beside the benchmark's creates and kwok's
    status updates."""
    lines = []
    for run in rows:
        counts = run.get("writes_per_pod") or {}
        if counts:
            shown = ", ".join(f"{label} {n:.2f}" for label, n in counts.items() if n >= 0.005)
            lines.append(f"- {run['label']} {run['mode']}: {shown}")
    if not lines:
        return []
    return ["Writes per bound pod, by kind (apiserver_request_total over the run):", "", *lines, ""]


def before_after(before: dict[str, Any], after: dict[str, Any], label: str) -> list[str]:
    """promsched's rows of an earlier run (before a change) next to this run's."""
    lines = [
        f"## promsched before and after ({label})",
        "",
        _row(
            [
                "Nodes",
                "Mode",
                "Pods",
                "Throughput (pods/s)",
                "p50 (ms)",
                "p99 (ms)",
                "Decision (ms/pod)",
                "Sched CPU (s)",
                "Peak RSS (MB)",
                "CPU util std (%)",
                "Prom queries/pod",
            ]
        ),
        _row(["---"] * 11),
    ]
    pairs = []
    for entry, run in _all_runs(after):
        if run["variant"] != "promsched":
            continue
        for old_entry, old in _all_runs(before):
            if (
                old["variant"] == "promsched"
                and old_entry["nodes"] == entry["nodes"]
                and old["mode"] == run["mode"]
                and old["pods"] == run["pods"]
            ):
                pairs.append((entry["nodes"], old, run))
    for nodes, old, new in pairs:
        cells = [str(nodes), new["mode"], str(new["pods"])]
        for key, fmt in (
            ("throughput", "{:.1f}"),
            ("p50_ms", "{:.0f}"),
            ("p99_ms", "{:.0f}"),
            ("decide_ms_mean", "{:.2f}"),
            ("scheduler_cpu_s", "{:.2f}"),
            ("peak_rss_mb", "{:.0f}"),
            ("spread.cpu_std", "{:.2f}"),
            ("queries_per_pod", "{:.4f}"),
        ):
            cells.append(f"{_cell(old, key, fmt)} -> {_cell(new, key, fmt)}")
        lines.append(_row(cells))
    return [*lines, ""] if pairs else []


def markdown(results: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    settings = results["settings"]
    machine = results["machine"]
    revision = results.get("revision", {})
    lines = [
        "# promsched benchmark",
        "",
        f"Run {results['started']} on {machine['cpus']} CPU(s) ({machine['cpu_model']}), Python "
        f"{machine['python']}, Kubernetes {results['kubernetes']}. Commit {revision.get('commit', '?')[:12]}"
        f"{' with uncommitted changes in ' if revision.get('changed') else ''}"
        f"{', '.join(revision.get('changed', []))}.",
        "",
    ]
    for invocation in results.get("invocations", []):
        lines.append(
            f"- `python -m bench.benchmark {' '.join(invocation['argv'])}` ({invocation['started']}): node "
            f"counts {', '.join(map(str, invocation['node_counts']))}, "
            f"wall time {invocation['wall_s'] / 60:.1f} min"
        )
    lines += [
        "",
        f"Each run: {settings['pods']} pods (requests cpu {settings['pod_requests']['cpu']}, memory "
        f"{settings['pod_requests']['memory']}), created at {settings['rate']:g} pods/s (`rate`) or all at "
        f"once with 64 creates in flight (`burst`), in a fresh namespace on empty nodes, with a freshly "
        f"started scheduler. Throughput = pods bound / (last binding seen - first create sent). Latency = "
        f"binding seen on a watch - creation (POST returned or pod first seen, whichever first). promsched's "
        f"policy: the "
        f"five built-in plugins, refreshInterval {settings['refresh']} (Prometheus queries are counted from "
        f'Prometheus\'s own `prometheus_http_requests_total{{handler="/api/v1/query"}}`). CPU and peak RSS: '
        f"/proc of the scheduler process (CPU over the run, RSS = VmHWM since its start); API server CPU per "
        f"binding = kube-apiserver CPU over the run (creates, bindings, events, watches, kwok's pod status "
        f"updates) / pods bound. Utilisation = node's simulated load profile + placed pods' requests / "
        f"allocatable (3900m, 15Gi); std and max over all nodes.",
        "",
        f"Each row is the median of {settings.get('repeats', 1)} repeat(s), run interleaved (every variant "
        f"and mode once, then again), with the range (min-max) in brackets; ratios are of medians. Sched "
        f"CPU/pod = the scheduler's CPU over the run / pods bound.",
        "",
    ]
    for entry in results["node_counts"]:
        nodes = entry["nodes"]
        runs = entry["runs"]
        own = entry.get("settings", settings)
        lines += [
            f"## {nodes} nodes",
            "",
            f"{own['pods']} pods per run. Sandbox start-up {entry.get('sandbox_up_s', 0):.0f} s; this node "
            f"count took {entry.get('wall_s', 0) / 60:.1f} min.",
            "",
        ]
        ratios = []
        for mode in ("rate", "burst"):
            mine = _find(results, nodes, "promsched", mode)
            if mine is None:
                continue
            for key in ("ks-default", "ks-raised", "null"):
                theirs = _find(results, nodes, key, mode)
                if theirs is not None:
                    ratios.append((f"promsched / {LABELS[key]}", mine, theirs))
        lines += _table(summaries.rows(runs), ratios)
        base = entry["baseline_spread"]
        lines += [
            "",
            f"Load profiles alone (no pods): CPU util std {base['cpu_std']:.2f}, max {base['cpu_max']:.1f}; "
            f"memory util std {base['memory_std']:.2f}, max {base['memory_max']:.1f}.",
            "",
        ]
        decisions = [
            f"{run['mode']} {run['pods']} pods: {run['decide_ms_mean']:.1f} ms"
            for run in [*runs, *entry.get("extra_runs", [])]
            if run["variant"] == "promsched" and _finite(run.get("decide_ms_mean"))
        ]
        if decisions:
            lines += [f"promsched's mean time to filter and score one pod: {'; '.join(decisions)}.", ""]
        lines += _writes_per_pod(summaries.rows(runs))
        for run in [*runs, *entry.get("extra_runs", [])]:
            restarts = run.get("watch_restarts", [])
            if restarts or run.get("late_binds") or run["bound"] < run["pods"]:
                lines += [
                    f"{run['label']} {run['mode']}: {run['bound']} of {run['pods']} pods bound within the "
                    f"time limit; the bench's watch restarted {len(restarts)} time(s) "
                    f"({'; '.join(restarts[:2]) or 'never'}), {run.get('late_binds', 0)} "
                    f"binding(s) found by a listing (timed late).",
                    "",
                ]
        loads = ", ".join(
            f"{run['variant']}/{run['mode']} {run.get('load_average_1m', math.nan):.1f}"
            for run in [*runs, *entry.get("extra_runs", [])]
        )
        lines += [f"Machine 1-minute load average at the start of each run (2 cores, shared): {loads}.", ""]
        if entry.get("extra_runs"):
            lines += ["Extra promsched runs (not in the ratios):", ""]
            lines += _table(entry["extra_runs"], [])
            lines.append("")
    if before is not None:
        revision = before.get("revision", {}).get("commit", "?")[:7]
        lines += before_after(before, results, f"before: commit {revision}, in before/results.md")
    lines += ["## Targets", "", _row(["Target", "Measured", "Status"]), _row(["---"] * 3)]
    for target in results.get("targets", []):
        lines.append(_row([target["target"], target["value"], f"**{target['status']}**"]))
    lines.append("")
    micro = results.get("micro") or []
    if micro:
        lines += [
            "## The decision alone, offline (`python -m bench.decide_micro`)",
            "",
            "`decide()` and `assume()` for a burst of pods on the same nodes and load profiles, without a "
            "cluster, in one process. " + str(results.get("micro_note", "")),
            "",
            _row(["Nodes", "Pods", "Variant", "ms per decision", "Same nodes chosen"]),
            _row(["---"] * 5),
        ]
        for row in micro:
            same = row.get("same_nodes")
            lines.append(
                _row(
                    [
                        str(row["nodes"]),
                        str(row["pods"]),
                        str(row["variant"]),
                        f"{row['ms_per_decision']:.2f}",
                        "" if same is None else ("yes" if same else "NO"),
                    ]
                )
            )
        lines.append("")
    for entry in results["node_counts"]:
        profile = entry.get("profile_file")
        if profile and Path(profile).exists():
            lines += [f"## Profile: promsched, {entry['nodes']} nodes, burst (py-spy, 100 Hz)", ""]
            lines += profile_summary(Path(profile))
            lines += [
                "",
                "`<lambda> (<string>)` is the constructor typing.NamedTuple generates "
                "(`PluginResult.__new__`, one per node and plugin scored in `metrics/scoring.py`), with the "
                "garbage collections its allocations trigger.",
                "",
            ]
    return "\n".join(lines)


# ----- py-spy profile -----------------------------------------------------------------------------------


def _short(frame: str) -> str:
    """`function (path/to/module.py)` with the path cut to the package."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("site-packages/", "/operator/", "/lib/python3.11/"):
        if marker in where:
            where = where.split(marker, 1)[1]
            break
    return f"{name} ({where})" if where else name


# Frames every busy sample shares (interpreter start-up, the CLI, Kopf's and asyncio's loop): left out of
# the inclusive table, which would otherwise open with a dozen 100% rows.
_ENVELOPE = (
    "_run_module_as_main ",
    "_run_code ",
    "<module> (promsched/cli.py)",
    "main (promsched/cli.py)",
    "_run (promsched/cli.py)",
    "run (promsched/operating/wiring.py)",
    "run (kopf/_core/reactor/running.py)",
    "run (asyncio/runners.py)",
    "Runner.run ",
    "BaseEventLoop.",
    "Handle._run ",
)
# A thread-pool worker waiting on its queue (no frame below it) is idle; py-spy does not always see it so.
_IDLE_LEAVES = ("_worker (concurrent/futures/thread.py)",)


def profile_summary(path: Path, top: int = 20) -> list[str]:
    """The functions with the most samples of the event-loop thread: on the stack (inclusive) and on
    top (self), as percentages of that thread's busy samples."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = idle = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        if frames[-1] in _IDLE_LEAVES:
            idle += count
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            if not frame.startswith(_ENVELOPE):
                inclusive[frame] += count
    if not total:
        return ["(no samples)"]
    lines = [
        f"{total} busy samples ({total / 100:.0f} s at 100 Hz; {idle} samples of an idle thread-pool worker "
        "left out). Percentages of the busy samples.",
        "",
        "Inclusive (on the stack; the event loop and CLI frames every sample shares are left out):",
        "",
        "| % | Function |",
        "| ---: | --- |",
    ]
    lines += [f"| {100 * n / total:.1f} | `{name}` |" for name, n in inclusive.most_common(top)]
    lines += ["", "Self (on top of the stack):", "", "| % | Function |", "| ---: | --- |"]
    lines += [f"| {100 * n / total:.1f} | `{name}` |" for name, n in own.most_common(top)]
    return lines


# ----- plots --------------------------------------------------------------------------------------------


def plots(results: dict[str, Any], out: Path) -> list[str]:
    """PNG plots per node count; returns what it did (or why not) as lines to print."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["matplotlib is not installed (pip install -e '.[bench]'): no plots"]
    written = []
    for entry in results["node_counts"]:
        nodes = entry["nodes"]
        runs = entry["runs"]
        if not runs:
            continue
        figure, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
        for axis, mode in zip(axes, ("rate", "burst"), strict=True):
            for run in (r for r in summaries.rows(runs) if r["mode"] == mode):
                values = run["latencies_s"]
                if values:
                    fractions = [(i + 1) / len(values) for i in range(len(values))]
                    axis.plot([1000 * v for v in values], fractions, label=run["label"])
            axis.set_xscale("log")
            axis.set_xlabel("creation to binding (ms)")
            axis.set_title(f"{nodes} nodes, {mode}")
            axis.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("fraction of pods")
        for axis in axes:
            if axis.get_legend_handles_labels()[0]:
                axis.legend(fontsize=8)
        figure.tight_layout()
        path = out / f"latency-cdf-{nodes}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)

        variants = list(dict.fromkeys(run["variant"] for run in runs))
        labels = [LABELS.get(v, v) for v in variants]
        figure, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        width = 0.38
        for offset, mode in ((-width / 2, "rate"), (width / 2, "burst")):
            picked = [_find(results, nodes, v, mode) for v in variants]
            axes[0].bar(
                [i + offset for i in range(len(variants))],
                [run["throughput"] if run else 0 for run in picked],
                width,
                label=mode,
            )
            axes[1].bar(
                [i + offset for i in range(len(variants))],
                [run["spread"]["cpu_std"] if run else 0 for run in picked],
                width,
                label=mode,
            )
        axes[1].axhline(
            entry["baseline_spread"]["cpu_std"], color="grey", linestyle="--", label="profiles alone"
        )
        for axis, title in zip(
            axes, ("throughput (pods bound/s)", "CPU utilisation std over nodes (%)"), strict=True
        ):
            axis.set_xticks(range(len(variants)), labels, rotation=12, fontsize=8)
            axis.set_title(f"{nodes} nodes: {title}")
            axis.legend(fontsize=8)
            axis.grid(True, axis="y", alpha=0.3)
        figure.tight_layout()
        path = out / f"throughput-spread-{nodes}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return [f"wrote {path}" for path in written]


def sanitize(value: Any) -> Any:
    """NaN and infinities as null, so results.json is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: sanitize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [sanitize(v) for v in value]
    return value
