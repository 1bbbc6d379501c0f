"""`make bench`'s results as a markdown report (results.md), and as strict JSON (`sanitize`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.commanding import DEPLOYED_SCRAPE_SECONDS
from bench.profile_summaries import profile_summary
from bench.summaries import Run, all_runs, figure, find, finite, rows
from bench.tables import row
from bench.variants import LABELS, PROMSCHED_KEYS
from promsched.sandbox.node_metrics.monitoring import SCRAPE_SECONDS

COLUMNS = (
    ("Bound", "bound", "{:.0f}"),
    ("Throughput (pods/s)", "throughput", "{:.1f}"),
    ("p50 (ms)", "p50_ms", "{:.0f}"),
    ("p90 (ms)", "p90_ms", "{:.0f}"),
    ("p99 (ms)", "p99_ms", "{:.0f}"),
    ("p99 of all repeats' pods (ms)", "p99_pooled_ms", "{:.0f}"),
    ("Prom queries/pod", "queries_per_pod", "{:.4f}"),
    ("Sched CPU (s)", "scheduler_cpu_s", "{:.2f}"),
    ("Sched CPU/pod (ms)", "scheduler_cpu_ms_per_pod", "{:.2f}"),
    ("Peak RSS (MB)", "peak_rss_mb", "{:.0f}"),
    ("API server CPU/bind (ms)", "apiserver_ms_per_bind", "{:.2f}"),
    ("API server bind latency (ms)", "apiserver_bind_latency_ms", "{:.1f}"),
    ("Prometheus CPU/pod (ms)", "prometheus_ms_per_pod", "{:.2f}"),
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
    "p99_pooled_ms",
    "scheduler_cpu_s",
    "scheduler_cpu_ms_per_pod",
    "peak_rss_mb",
    "apiserver_ms_per_bind",
    "apiserver_bind_latency_ms",
    "prometheus_ms_per_pod",
    "scheduling_writes_per_pod",
    "spread.cpu_std",
    "spread.cpu_max",
    "spread.memory_std",
    "spread.memory_max",
}


def _cell(run: Run, key: str, pattern: str) -> str:
    """The value; for a summary of several repeats, the median and its range."""
    value = figure(run, key)
    if not finite(value):
        return "-"
    low, high = run.get("range", {}).get(key, (value, value))
    shown = pattern.format(value)
    if run.get("repeats", 1) > 1 and pattern.format(low) != pattern.format(high):
        shown += f" ({pattern.format(low)}-{pattern.format(high)})"
    return shown


def _table(runs: list[Run], ratios: list[tuple[str, Run, Run]]) -> list[str]:
    header = ["Variant", "Mode", "Pods", *(title for title, _, _ in COLUMNS)]
    lines = [row(header), row(["---"] * len(header))]
    for run in runs:
        mode = run["mode"] + (" (py-spy)" if run.get("profiled") else "")
        lines.append(
            row([run["label"], mode, str(run["pods"]), *(_cell(run, key, fmt) for _, key, fmt in COLUMNS)])
        )
    for title, mine, theirs in ratios:
        cells = []
        for _, key, _fmt in COLUMNS:
            a, b = figure(mine, key), figure(theirs, key)
            cells.append(f"x{a / b:.2f}" if key in RATIO_KEYS and finite(a) and finite(b) and b else "")
        lines.append(row([f"*{title}*", mine["mode"], "", *cells]))
    return lines


def _writes_per_pod(summaries: list[Run]) -> list[str]:
    """Each row's writes per bound pod by kind (its median-throughput repeat), from the API server's own
    counts: the schedulers' bindings, events and conditions, beside the benchmark's creates and kwok's
    status updates."""
    lines = []
    for run in summaries:
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
        row(
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
        row(["---"] * 11),
    ]
    pairs = []
    for entry, run in all_runs(after):
        if run["variant"] != "promsched":
            continue
        for old_entry, old in all_runs(before):
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
        lines.append(row(cells))
    return [*lines, ""] if pairs else []


def markdown(results: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    """results.md: how the runs were made, a section per node count, promsched before and after a change
    (when OUT/before/results.json exists), the targets, the offline decision timings and the profiles."""
    lines = _opening(results)
    for entry in results["node_counts"]:
        lines += _node_count(results, entry)
    if before is not None:
        revision = before.get("revision", {}).get("commit", "?")[:7]
        lines += before_after(before, results, f"before: commit {revision}, in before/results.md")
    lines += _targets(results) + _micro(results) + _profiles(results)
    return "\n".join(lines)


def _opening(results: dict[str, Any]) -> list[str]:
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
            + "".join(
                f"; {LABELS[key]} from {source['folder']} at commit {source.get('commit', '?')[:12]}"
                f"{' with uncommitted changes' if source.get('changed') else ''}"
                for key, source in invocation.get("sources", {}).items()
            )
        )
    lines += [
        "",
        f"Each run: {settings['pods']} pods (requests cpu {settings['pod_requests']['cpu']}, memory "
        f"{settings['pod_requests']['memory']}{_shaped(settings.get('shape', 'plain'))}), "
        f"created at {settings['rate']:g} pods/s (`rate`) or all at "
        f"once with 64 creates in flight (`burst`), in a fresh namespace on empty nodes, with a freshly "
        f"started scheduler. Throughput = pods bound / (last binding seen - first create sent). Latency = "
        f"binding seen on a watch - creation (POST returned or pod first seen, whichever first); "
        f"the p99 of all repeats' pods is that of every pod of a row's repeats together. promsched's "
        f"policy: the "
        f"five built-in plugins, refreshInterval {settings['refresh']} (Prometheus queries are counted from "
        f'Prometheus\'s own `prometheus_http_requests_total{{handler="/api/v1/query"}}`). CPU and peak RSS: '
        f"/proc of the scheduler process (CPU over the run, RSS = VmHWM since its start); a run ends once "
        f"every pod is bound and the API server counted an event write per pod (or none for 1 s), so events "
        f"a scheduler writes behind its bindings are in its CPU. API server CPU per "
        f"binding = kube-apiserver CPU over the run (creates, bindings, events, watches, kwok's pod status "
        f"updates) / pods bound; API server bind latency = its own mean time serving one binding "
        f"(apiserver_request_duration_seconds); Prometheus CPU per pod = the sandbox's Prometheus's CPU over "
        f"the run (scrapes, and promsched's queries) / pods bound. Utilisation = node's simulated load "
        f"profile + placed pods' requests / allocatable (3900m, 15Gi); std and max over all nodes.",
        "",
        f"Each row is the median of {settings.get('repeats', 1)} repeat(s), run interleaved (every variant "
        f"and mode once, then again){_warmed_up(settings)}, with the range (min-max) in brackets; ratios "
        f"are of medians. Sched CPU/pod = the scheduler's CPU over the run / pods bound.",
        "",
    ]
    return lines


def _node_count(results: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """A node count's table of medians and ratios, then its notes: the profiles' own spread, promsched's
    decision time, writes per pod, runs whose watch broke, the load average, the extra runs."""
    nodes = entry["nodes"]
    runs = entry["runs"]
    own = entry.get("settings", results["settings"])
    lines = [
        f"## {nodes} nodes",
        "",
        f"{own['pods']} pods per run. Sandbox start-up {entry.get('sandbox_up_s', 0):.0f} s; this node "
        f"count took {entry.get('wall_s', 0) / 60:.1f} min.",
        "",
    ]
    ratios = []
    for mode in ("rate", "burst"):
        for ours in PROMSCHED_KEYS:
            mine = find(results, nodes, ours, mode)
            if mine is None:
                continue
            for key in ("promsched-baseline", "ks-default", "ks-raised", "null"):
                if key == ours:
                    continue
                theirs = find(results, nodes, key, mode)
                if theirs is not None:
                    ratios.append((f"{LABELS[ours]} / {LABELS[key]}", mine, theirs))
    lines += _table(rows(runs), ratios)
    base = entry["baseline_spread"]
    lines += [
        "",
        f"Load profiles alone (no pods): CPU util std {base['cpu_std']:.2f}, max {base['cpu_max']:.1f}; "
        f"memory util std {base['memory_std']:.2f}, max {base['memory_max']:.1f}.",
        "",
    ]
    every_run = [*runs, *entry.get("extra_runs", [])]
    lines += _per_run(every_run, "promsched's mean time to filter and score one pod", "decide_ms_mean")
    lines += _per_run(
        every_run,
        "promsched's event loop lag over the run, p99 of `promsched_event_loop_lag_seconds` as "
        "histogram_quantile reads it, and in brackets that of the observations made while a metrics "
        "refresh ran, over how many there were (issue 43: under 20 ms during a refresh)",
        "loop_lag_p99_ms",
        lambda run: (
            f"{run['loop_lag_refresh_p99_ms']:.1f} ms over {run.get('loop_lag_refresh_observations', 0):.0f}"
            if finite(run.get("loop_lag_refresh_p99_ms"))
            else None
        ),
    )
    lines += _per_run(
        every_run,
        "promsched's mean binding request, as it timed it (in brackets what the API server took to "
        "serve one)",
        "bind_ms_mean",
        lambda run: (
            f"{run['apiserver_bind_latency_ms']:.1f} ms"
            if finite(run.get("apiserver_bind_latency_ms"))
            else None
        ),
    )
    lines += _writes_per_pod(rows(runs))
    for run in every_run:
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
        f"{run['variant']}/{run['mode']} {run.get('load_average_1m', math.nan):.1f}" for run in every_run
    )
    lines += [f"Machine 1-minute load average at the start of each run (2 cores, shared): {loads}.", ""]
    lines += _priorities(entry)
    lines += _scraping(entry)
    if entry.get("extra_runs"):
        lines += ["Extra promsched runs (not in the ratios):", ""]
        lines += _table(entry["extra_runs"], [])
        lines.append("")
    return lines


def _targets(results: dict[str, Any]) -> list[str]:
    lines = ["## Targets", "", row(["Target", "Measured", "Status"]), row(["---"] * 3)]
    for target in results.get("targets", []):
        lines.append(row([target["target"], target["value"], f"**{target['status']}**"]))
    lines.append("")
    return lines


def _micro(results: dict[str, Any]) -> list[str]:
    micro = results.get("micro") or []
    if not micro:
        return []
    lines = [
        "## The decision alone, offline (`python -m bench.decide_micro`)",
        "",
        "`decide()` and `assume()` for a burst of pods on the same nodes and load profiles, without a "
        "cluster, in one process. " + str(results.get("micro_note", "")),
        "",
        row(["Nodes", "Pods", "Variant", "ms per decision", "Same nodes chosen"]),
        row(["---"] * 5),
    ]
    for timing in micro:
        same = timing.get("same_nodes")
        lines.append(
            row(
                [
                    str(timing["nodes"]),
                    str(timing["pods"]),
                    str(timing["variant"]),
                    f"{timing['ms_per_decision']:.2f}",
                    "" if same is None else ("yes" if same else "NO"),
                ]
            )
        )
    lines.append("")
    return lines


def _profiles(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for entry in results["node_counts"]:
        profile = entry.get("profile_file")
        if profile and Path(profile).exists():
            mode = entry.get("profile_mode") or "burst"
            lines += [f"## Profile: promsched, {entry['nodes']} nodes, {mode} (py-spy, 100 Hz)", ""]
            lines += profile_summary(Path(profile))
            lines += [
                "",
                "`<lambda> (<string>)` is the constructor typing.NamedTuple generates "
                "(`PluginResult.__new__`, one per node and plugin scored in `metrics/scoring.py`), with the "
                "garbage collections its allocations trigger.",
                "",
            ]
    return lines


def sanitize(value: Any) -> Any:
    """NaN and infinities as null, so results.json is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: sanitize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [sanitize(v) for v in value]
    return value


def _per_run(
    runs: list[dict[str, Any]],
    what: str,
    key: str,
    bracketed: Callable[[dict[str, Any]], str | None] = lambda _run: None,
) -> list[str]:
    """One paragraph of `what` per run of a promsched variant that measured `key` (in ms), each with what
    `bracketed` adds in brackets, the other variants' (rules, baseline) named; none when no run did."""
    figures = [
        ("" if run["variant"] == "promsched" else f"{run['variant']} ")
        + f"{run['mode']} {run['pods']} pods: {run[key]:.1f} ms"
        + (f" ({extra})" if (extra := bracketed(run)) is not None else "")
        for run in runs
        if run["variant"] in PROMSCHED_KEYS and finite(run.get(key))
    ]
    return [f"{what}: {'; '.join(figures)}.", ""] if figures else []


def _priorities(entry: dict[str, Any]) -> list[str]:
    """The run's priorities where `--sandbox-nice` set them apart."""
    nice = entry.get("settings", {}).get("sandbox_nice", 0)
    if not nice:
        return []
    return [
        f"The sandbox's processes (API server, etcd, kwok, Prometheus) ran at nice {nice} and the schedulers "
        "at 0 (`--sandbox-nice`): where both wanted a core, the OS ran the scheduler first.",
        "",
    ]


def _scraping(entry: dict[str, Any]) -> list[str]:
    """How often Prometheus scraped and evaluated its rules, where `--scrape-interval` set it apart
    from the sandbox's default (runs before the option: the default)."""
    seconds = entry.get("settings", {}).get("scrape_seconds", SCRAPE_SECONDS)
    if seconds == SCRAPE_SECONDS:
        return []
    return [
        f"The sandbox's Prometheus scraped the exporters and evaluated its rules every {seconds:g} s "
        f"(`--scrape-interval`; the sandbox's default is {SCRAPE_SECONDS:g} s, kube-prometheus-stack's "
        f"{DEPLOYED_SCRAPE_SECONDS:g} s), and the backfilled history was sampled as often.",
        "",
    ]


def _shaped(shape: str) -> str:
    return "" if shape == "plain" else f"; placement rules: `{shape}`, bench.pods.SHAPES"


def _warmed_up(settings: dict[str, Any]) -> str:
    pods = settings.get("warmup_pods", 0)  # at most the runs' pods (bench.benchmark's arguments)
    return (
        f", after a warm-up run of {pods} pods not counted (the first variant's first mode)" if pods else ""
    )
