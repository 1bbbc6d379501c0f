"""`bench.quiet`'s results as OUT/quiet.json, a markdown report (OUT/quiet.md) and a plot (OUT/quiet.png)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Imported `as` themselves: re-exported for bench.rebalance_reporting, which imports them from here.
from bench.commanding import Report
from bench.plotting import MISSING, pyplot, save
from bench.reporting import sanitize
from bench.requestcounts import rate_series
from bench.tables import ratio, shown, table, value

# (label, where in a run's results, format): the rows of the side-by-side table.
ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "scheduling writes/min while parked (pods/status, pods/binding, events)",
        ("park", "scheduling_writes_per_minute"),
        "{:.0f}",
    ),
    ("all writes/min while parked, above the baseline", ("park", "net_writes_per_minute"), "{:.0f}"),
    (
        "scheduling writes/min, second half of the park",
        ("park", "steady_scheduling_writes_per_minute"),
        "{:.0f}",
    ),
    ("all writes/min above the baseline, second half", ("park", "steady_net_writes_per_minute"), "{:.0f}"),
    ("Event objects at the end of the park", ("events", "objects_parked"), "{:.0f}"),
    ("occurrences they count (series.count / count)", ("events", "occurrences_parked"), "{:.0f}"),
    (
        "pods without a FailedScheduling Event at the end of the park",
        ("events", "pods_without_failed_scheduling_parked"),
        "{:.0f}",
    ),
    ("writes the scheduler dropped while parked (its own count)", ("writes_dropped_parked",), "{:.0f}"),
    ("writes the scheduler dropped in all", ("writes_dropped_end",), "{:.0f}"),
    ("Event objects once the freed pods are bound and writes settled", ("events", "objects_end"), "{:.0f}"),
    ("pods bound while parked (expected 0)", ("bound_while_parked",), "{:.0f}"),
    ("freed pods bound", ("freed", "bound"), "{:.0f}"),
    ("time from freeing room to the first binding, s", ("freed", "first_s"), "{:.1f}"),
    ("time from freeing room to binding, median, s", ("freed", "median_s"), "{:.1f}"),
    ("time from freeing room to binding, max, s", ("freed", "max_s"), "{:.1f}"),
    ("bindings/s while the other half stays parked", ("freed", "binds_per_second"), "{:.1f}"),
    ("scheduling writes from freeing to the last binding", ("freed", "scheduling_writes"), "{:.0f}"),
    ("scheduling writes in the settle window after it", ("settle", "scheduling_writes"), "{:.0f}"),
    ("scheduler CPU while parked, % of a core", ("park", "scheduler_cpu_percent"), "{:.1f}"),
    ("scheduler CPU, second half of the park, %", ("park", "steady_scheduler_cpu_percent"), "{:.1f}"),
    ("kube-apiserver CPU while parked, % of a core", ("park", "apiserver_cpu_percent"), "{:.1f}"),
    ("kube-apiserver CPU, second half of the park, %", ("park", "steady_apiserver_cpu_percent"), "{:.1f}"),
)
# The benchmark's own writes in the park window, marked so in the table by verb and resource.
OWN = ("POST pods", "PATCH nodes")


def _pair(results: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    by_key = {run["variant"]: run for run in results.get("runs", [])}
    if "promsched" in by_key and "ks-default" in by_key:
        return by_key["promsched"], by_key["ks-default"]
    return None


def ratios(results: dict[str, Any]) -> dict[str, float]:
    """promsched / kube-scheduler for each row of the table."""
    pair = _pair(results)
    if pair is None:
        return {}
    mine, theirs = pair
    return {label: ratio(value(mine, path), value(theirs, path)) for label, path, _ in ROWS}


def targets(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, reported, not asserted: writes per minute while parked at most
    kube-scheduler's; freed pods bound within 10 s of kube-scheduler's time (median and max)."""
    pair = _pair(results)
    if pair is None:
        return {}
    mine, theirs = pair
    found = {}
    for name, path in (
        ("scheduling writes/min while parked <= kube-scheduler's", ("park", "scheduling_writes_per_minute")),
        ("all writes/min above baseline while parked <= kube-scheduler's", ("park", "net_writes_per_minute")),
    ):
        found[name] = value(mine, path) <= value(theirs, path)
    for name, path in (
        ("median time to bind within 10 s of kube-scheduler's", ("freed", "median_s")),
        ("max time to bind within 10 s of kube-scheduler's", ("freed", "max_s")),
    ):
        found[name] = value(mine, path) <= value(theirs, path) + 10.0
    found["all freed pods bound (both)"] = all(
        value(run, ("freed", "bound")) >= value(run, ("freed", "capacity")) for run in pair
    )
    return found


def markdown(results: dict[str, Any]) -> str:
    settings, room, runs = results["settings"], results["room"], results["runs"]
    machine, changed = results["machine"], results["revision"]["changed"]
    lines = [
        "# Quiet under pressure: pods that fit nowhere, promsched beside kube-scheduler",
        "",
        f"`{results['command']}`: started {results['started']}, {results['wall_s'] / 60:.1f} min wall; "
        f"Kubernetes {results['kubernetes']}; {machine['cpus']} CPUs ({machine['cpu_model']}); "
        f"commit {results['revision']['commit'][:12]}"
        + (f" with {len(changed)} changed file(s) under operator/" if changed else ""),
        "",
        f"{settings['nodes']} kwok nodes, all tainted `{settings['taint']['key']}` (NoSchedule); "
        f"{settings['pods']} pods per scheduler, each requesting {room['cpu_milli']}m CPU, parked "
        f"{settings['park_minutes']:g} min; then {room['nodes']} nodes lose the taint: room for "
        f"{room['capacity']} pods ({room['per_node']} per node, exactly full).",
    ]
    if settings["park_minutes"] < 10:
        lines += ["", f"**The park was {settings['park_minutes']:g} minutes, shorter than the issue's 10.**"]
    lines += [
        "",
        "Writes come from the API server's `apiserver_request_total` (deltas between readings). Scheduling "
        'writes are pods/binding, pods/status and events (core and events.k8s.io); "all writes above the '
        f"baseline\" subtracts each verb and resource's rate over {results['baseline']['seconds']:.0f} s "
        "with no scheduler running (kwok's heartbeats, the controllers) and the benchmark's own pod creates "
        "and node patches. The park window runs from the first create to the freeing of room.",
        "",
    ]
    found_ratios = ratios(results)
    header = ["", *(run["label"] for run in runs), *(["ratio"] if found_ratios else [])]
    rows = []
    for label, path, template in ROWS:
        cells = [label, *(shown(template, value(run, path)) for run in runs)]
        rows.append(cells + ([shown("{:.2f}", found_ratios[label])] if found_ratios else []))
    lines += table(header, rows)
    goals = targets(results)
    if goals:
        lines += ["", "Targets (reported, not asserted):", ""]
        lines += [f"- {name}: {'yes' if met else '**no**'}" for name, met in goals.items()]
    keys = sorted({key for run in runs for key in run["park"]["writes_per_minute"]})
    baseline = results["baseline"]["writes_per_minute"]
    lines += ["", "Writes per minute while parked, by verb and resource:", ""]
    lines += table(
        ["write", *(run["label"] for run in runs), "baseline (no scheduler)"],
        (
            [
                f"{key} (the benchmark's)" if key in OWN else key,
                *(f"{run['park']['writes_per_minute'].get(key, 0.0):.1f}" for run in runs),
                f"{baseline.get(key, 0.0):.1f}",
            ]
            for key in keys
        ),
    )
    for run in runs:
        if run["watch_restarts"] or run["late_binds"] or run["failed_creates"]:
            lines += [
                "",
                f"{run['label']}: {run['failed_creates']} failed creates, {len(run['watch_restarts'])} watch "
                f"restarts, {run['late_binds']} bindings found by a listing (timed late).",
            ]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], out: Path) -> str:
    """Scheduling writes per minute over time, one line per scheduler; returns what it did."""
    plt = pyplot()
    if plt is None:
        return f"{MISSING}: no plot"
    figure, axes = plt.subplots(figsize=(9, 4.5))
    for run in results["runs"]:
        series = rate_series([(seconds, count) for seconds, count in run["series"]])
        line = axes.plot(
            [t / 60 for t, _ in series], [per_minute for _, per_minute in series], label=run["label"]
        )
        axes.axvline(run["free_at_s"] / 60, color=line[0].get_color(), linestyle=":", linewidth=1)
    axes.set_xlabel("minutes since the first create (dotted: room freed)")
    axes.set_yscale("symlog", linthresh=10)
    axes.set_ylim(bottom=0)
    axes.set_ylabel("scheduling writes per minute (log above 10)")
    axes.set_title(
        f"{results['settings']['pods']} parked pods, {results['settings']['nodes']} nodes: "
        "pods/status + pods/binding + events"
    )
    axes.legend()
    axes.grid(alpha=0.3)
    return save(plt, figure, out / "quiet.png")


def write(results: dict[str, Any], out: Path, report: Report) -> str:
    results["ratios"] = ratios(results)
    results["targets"] = targets(results)
    (out / "quiet.json").write_text(json.dumps(sanitize(results), indent=1, allow_nan=False))
    text = markdown(results)
    (out / "quiet.md").write_text(text)
    report(plot(results, out))
    return text
