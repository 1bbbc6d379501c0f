"""`make bench-quality SEEDS=a,b,c` (issue 40): the placement scoreboard. Each seed's trace is replayed, in
one run, against every scheduler of `bench.quality`: each seed a `python -m bench.quality --seed N` of its
own (a sandbox of its own, with that seed's background loads) writing OUT/seed-N/, and the outage scenario
on the first seed another (OUT/outage-seed-N/), `--jobs` of them at once. OUT/scoreboard.{json,md} and
scoreboard-hot-nodes.png hold each seed's rows, the outage's, the medians across seeds and the issue's
targets judged on the medians, with the commit, the policy file's sha256 and the seeds.
"""

from __future__ import annotations

import hashlib
import json
import math
import signal
import statistics
import subprocess
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from bench.commanding import REPO, Report
from bench.facts import measured_on
from bench.plotting import MISSING, pyplot, save
from bench.quality_estimates import estimation_table
from bench.quality_outage import outage_rows, outage_targets
from bench.quality_reporting import KUBE, PROMSCHED, ROWS, TRIMARANS
from bench.tables import ratio, shown, table, value
from bench.targets import target
from bench.trace_benches import Output
from promsched.sandbox.control_plane.clusters import SandboxError

# Issue 40's targets on the medians.
HOT_VS_KUBE = 0.5
HOT_VS_TRIMARAN = 0.8
STD_VS_KUBE = 0.7
SIBLINGS_ERROR_PCT = 15.0
# Kept from each run in scoreboard.json: the figures, not the per-step grids (those stay in seed-N/).
LEFT_IN_SEED = ("cpu_grid", "memory_grid", "pods_per_node")


def policy_facts(policy_file: Path) -> dict[str, str]:
    return {
        "file": str(policy_file.relative_to(REPO)),
        "sha256": hashlib.sha256(policy_file.read_bytes()).hexdigest(),
    }


def slim(run: dict[str, Any]) -> dict[str, Any]:
    return {key: found for key, found in run.items() if key not in LEFT_IN_SEED}


def pooled_estimation(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Estimation errors over every seed's pods: the seeds' means weighted by their pods."""
    sums: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        for source, resources in run.get("estimation", {}).items():
            for resource, found in resources.items():
                into = sums.setdefault((source, resource), [0.0, 0.0, 0.0])
                into[0] += found["pods"]
                into[1] += found["pods"] * found["mae_pct"]
                into[2] += found["pods"] * found["koordinator_mae_pct"]
    pooled: dict[str, dict[str, dict[str, float]]] = {}
    for (source, resource), (pods, ours, koordinator) in sums.items():
        pooled.setdefault(source, {})[resource] = {
            "pods": pods,
            "mae_pct": ours / pods if pods else math.nan,
            "koordinator_mae_pct": koordinator / pods if pods else math.nan,
        }
    return pooled


def medians(per_seed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per scheduler (in the first seed's order): the median of each figure over the seeds that
    measured it, and the estimation errors pooled over the seeds."""
    order: list[str] = []
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for seed in per_seed:
        for run in seed["runs"]:
            if run["variant"] not in by_variant:
                order.append(run["variant"])
            by_variant.setdefault(run["variant"], []).append(run)
    rows = []
    for variant in order:
        runs = by_variant[variant]
        row: dict[str, Any] = {"variant": variant, "label": runs[0]["label"], "seeds": len(runs)}
        for _, key, _ in ROWS:
            found = [value(run, (key,)) for run in runs]
            finite = [number for number in found if math.isfinite(number)]
            row[key] = statistics.median(finite) if finite else math.nan
        estimation = pooled_estimation(runs)
        if estimation:
            row["estimation"] = estimation
        rows.append(row)
    return rows


def folder(seed: int, outage: bool) -> str:
    """Where one seed's run (or its outage scenario) writes its results, under OUT."""
    return f"outage-seed-{seed}" if outage else f"seed-{seed}"


def measure_apart(command: Sequence[str], out: Path) -> dict[str, Any]:
    """Run one seed's bench as a process of its own (`command`, writing into `out`, its output into
    `out`.log) and return its quality.json; stopped with SIGTERM (it then stops its sandbox) if this
    one is."""
    out.mkdir(parents=True, exist_ok=True)
    with out.with_suffix(".log").open("wb") as log:
        process = subprocess.Popen(
            [*command, "--out", str(out)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            code = process.wait()
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait()
    if code != 0:
        raise SandboxError(f"{' '.join(command[2:])} exited {code}; its output: {out.with_suffix('.log')}")
    results: dict[str, Any] = json.loads((out / "quality.json").read_text())
    return results


def ended_in_turn(futures: Sequence[Future[Any]]) -> Iterator[Future[Any]]:
    """`futures` as they end; those found ended together in the order given. `as_completed` gives
    them in a set's order, which put an outage's rows before a seed's that had ended first."""
    waiting = list(futures)
    while waiting:
        done, _ = wait(waiting, return_when=FIRST_COMPLETED)
        yield from (future for future in waiting if future in done)
        waiting = [future for future in waiting if future not in done]


def scoreboard(
    runs: Sequence[tuple[int, bool]],
    settings: dict[str, Any],
    policy_file: Path,
    measure: Callable[[int, bool], dict[str, Any]],
    written: Callable[[dict[str, Any]], object],
    jobs: int,
    report: Report,
) -> dict[str, Any]:
    """Measure each (seed, outage scenario or not) of `runs`, `jobs` at once, keeping the results
    written (`written`) as each ends; the seeds in the order given."""
    seeds = [seed for seed, outage in runs if not outage]
    results: dict[str, Any] = {
        "settings": settings,
        "seeds": seeds,
        "policy": policy_facts(policy_file),
        **measured_on(),
        "per_seed": [],
        "outage": [],
        "medians": [],
    }
    measured: dict[int, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(measure, seed, outage): (seed, outage) for seed, outage in runs}
        for future in ended_in_turn(list(futures)):
            seed, outage = futures[future]
            try:
                found = future.result()
            except SandboxError as error:
                # The other seeds' runs go on; the report names what failed.
                report(f"{folder(seed, outage)}: FAILED: {error}")
                results.setdefault("failed", []).append({"run": folder(seed, outage), "error": str(error)})
                written(results)
                continue
            report(f"{folder(seed, outage)}: done")
            if outage:
                results["outage"] = [{"seed": seed, **slim(run)} for run in found["runs"]]
            else:
                measured[seed] = {
                    "seed": seed,
                    "trace": found["trace"],
                    "wall_s": found.get("wall_s", math.nan),
                    "runs": [slim(run) for run in found["runs"]],
                }
            results["per_seed"] = [measured[seed] for seed in seeds if seed in measured]
            results["medians"] = medians(results["per_seed"])
            written(results)
    return results


def _by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["variant"]: row for row in rows}


def better_trimaran(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    found = [row for row in rows if row["variant"] in TRIMARANS]
    return min(found, key=lambda row: value(row, ("hot_cpu_node_s",))) if found else None


def _bounded(name: str, ours: float, theirs: float, bound: float, what: str) -> dict[str, Any]:
    """`ours` at most `bound` x `theirs`, with the ratio and how far off the bound it is."""
    if not (math.isfinite(ours) and math.isfinite(theirs)):
        return target(name, "-", None)
    if theirs == 0:  # no ratio: met only by none at all
        return target(name, f"{ours:.2f} vs 0 {what}", ours == 0)
    found = ours / theirs
    return target(name, f"{ours:.2f} vs {theirs:.2f} {what}: x{found:.2f} (bound x{bound:g})", found <= bound)


def _pending_that_kube_placed(per_seed: list[dict[str, Any]]) -> int:
    """Per seed, the pods promsched left pending at the end beyond those kube-scheduler left."""
    extra = 0
    for seed in per_seed:
        runs = _by_key(seed["runs"])
        if PROMSCHED in runs and KUBE in runs:
            extra += max(0, int(runs[PROMSCHED]["pending_at_end"]) - int(runs[KUBE]["pending_at_end"]))
    return extra


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 40's targets on the medians across seeds, reported, not asserted."""
    rows = results.get("medians", [])
    by_key = _by_key(rows)
    ours, kube, trimaran = by_key.get(PROMSCHED), by_key.get(KUBE), better_trimaran(rows)

    def of(row: dict[str, Any] | None, key: str) -> float:
        return value(row, (key,)) if row else math.nan

    found = [
        _bounded(
            f"CPU hot-node-seconds <= {HOT_VS_KUBE:g}x kube-scheduler's",
            of(ours, "hot_cpu_node_s"),
            of(kube, "hot_cpu_node_s"),
            HOT_VS_KUBE,
            "node-s",
        ),
        _bounded(
            f"CPU hot-node-seconds <= {HOT_VS_TRIMARAN:g}x the better Trimaran plugin's"
            + (f" ({trimaran['label']})" if trimaran else ""),
            of(ours, "hot_cpu_node_s"),
            of(trimaran, "hot_cpu_node_s"),
            HOT_VS_TRIMARAN,
            "node-s",
        ),
        _bounded(
            f"time-averaged CPU std <= {STD_VS_KUBE:g}x kube-scheduler's",
            of(ours, "cpu_std"),
            of(kube, "cpu_std"),
            STD_VS_KUBE,
            "points",
        ),
    ]
    # Sub-second waits are the watch's and the API server's timing: 1 s is the least difference counted.
    wait, wait_kube = of(ours, "wait_mean_s"), of(kube, "wait_mean_s")
    known = math.isfinite(wait) and math.isfinite(wait_kube)
    found.append(
        target(
            "mean wait no worse than kube-scheduler's (1 s the least difference counted)",
            f"{wait:.2f} s vs {wait_kube:.2f} s" if known else "-",
            wait <= wait_kube + 1.0 if known else None,
        )
    )
    seeds = results.get("per_seed", [])
    extra = _pending_that_kube_placed(seeds)
    found.append(
        target(
            "no pod left pending that kube-scheduler placed",
            f"{extra} more left pending than kube-scheduler, over {len(seeds)} seeds",
            extra == 0 if ours and kube else None,
        )
    )
    siblings = value(ours, ("estimation", "Siblings", "cpu", "mae_pct")) if ours else math.nan
    pods = value(ours, ("estimation", "Siblings", "cpu", "pods")) if ours else math.nan
    found.append(
        target(
            f"Siblings CPU estimation error <= {SIBLINGS_ERROR_PCT:g}% (mean absolute, all seeds' pods)",
            f"{siblings:.1f}% over {pods:.0f} pods" if math.isfinite(siblings) else "-",
            siblings <= SIBLINGS_ERROR_PCT if math.isfinite(siblings) else None,
        )
    )
    return found + outage_targets(results.get("outage", []))


def _median_table(rows: list[dict[str, Any]]) -> list[str]:
    by_key = _by_key(rows)
    ours, kube, trimaran = by_key.get(PROMSCHED), by_key.get(KUBE), better_trimaran(rows)
    compared = [
        (name, other) for name, other in (("kube-scheduler", kube), ("better Trimaran", trimaran)) if other
    ]
    header = ["", *(row["label"] for row in rows), *(f"promsched / {name}" for name, _ in compared)]
    lines = []
    for label, key, template in ROWS:
        cells = [label, *(shown(template, value(row, (key,))) for row in rows)]
        cells += [shown("{:.2f}", ratio(value(ours, (key,)), value(other, (key,)))) for _, other in compared]
        lines.append(cells)
    return table(header, lines)


OUTAGE_NOTE = (
    "Seed {seed}'s trace again, Prometheus stopped for {span:g} minutes in its middle, each scheduler in "
    "a sandbox of its own run (outage-seed-{seed}/). CPU hot-node-seconds in the outage are worked out from "
    "the placements (each node's background plus its running pods' usage), since Prometheus recorded "
    "nothing then; the waits are those of the pods that arrived in it."
)

# Each seed's rows in the scoreboard: the figures the targets read.
SEED_COLUMNS = (
    ("CPU hot-node-s", "hot_cpu_node_s", "{:.0f}"),
    ("CPU std", "cpu_std", "{:.2f}"),
    ("mean wait, s", "wait_mean_s", "{:.2f}"),
    ("max wait, s", "wait_max_s", "{:.1f}"),
    ("pods bound", "pods_bound", "{:.0f}"),
    ("left pending", "pending_at_end", "{:.0f}"),
)


def markdown(results: dict[str, Any]) -> str:
    settings = results["settings"]
    revision = results["revision"]
    lines = [
        f"# Placement scoreboard: {settings['nodes']} nodes, {settings['minutes']:g} minutes of trace, "
        f"seeds {', '.join(str(seed) for seed in results['seeds'])}",
        "",
        f"Policy `{results['policy']['file']}` (sha256 `{results['policy']['sha256']}`), commit "
        f"{revision['commit'][:10]}"
        + (" (with uncommitted changes under operator/)" if revision["changed"] else "")
        + f", sandbox {results.get('kubernetes', '?')}, {results['machine']['cpus']} CPUs. "
        f"{settings['requested']:.0%} of the CPU requested at the end, promsched refreshing every "
        f"{settings['refresh']}. Each seed's full report: seed-N/quality.md.",
        "",
        "## Medians across seeds",
        "",
        *_median_table(results.get("medians", [])),
        "",
        "## Each seed",
        "",
    ]
    seed_rows = [
        [
            str(seed["seed"]),
            run["label"],
            *(shown(template, value(run, (key,))) for _, key, template in SEED_COLUMNS),
        ]
        for seed in results.get("per_seed", [])
        for run in seed["runs"]
    ]
    lines += table(["seed", "scheduler", *(label for label, _, _ in SEED_COLUMNS)], seed_rows)
    estimation = estimation_table(results.get("medians", []))
    if estimation:
        lines += ["", "## Estimation error, all seeds' pods", "", *estimation]
    outage = results.get("outage", [])
    if outage:
        span = settings["outage_minutes"]
        lines += ["", "## Prometheus outage", "", OUTAGE_NOTE.format(span=span, seed=outage[0]["seed"]), ""]
        lines += outage_rows([(run["seed"], run) for run in outage])
    for failed in results.get("failed", []):
        lines += ["", f"**{failed['run']} failed**: {failed['error']}"]
    lines += ["", "## Targets (medians across the seeds)", ""]
    lines += [f"- {found['status']}: {found['target']} ({found['value']})" for found in targets(results)]
    return "\n".join(lines) + "\n"


def plots(results: dict[str, Any], out: Path) -> list[str]:
    plt = pyplot()
    if plt is None:
        return [f"{MISSING}: no plots"]
    per_seed = results.get("per_seed", [])
    rows = results.get("medians", [])
    if not per_seed or not rows:
        return []
    groups = [*(f"seed {seed['seed']}" for seed in per_seed), "median"]
    figure, axis = plt.subplots(figsize=(1.6 * len(groups) * max(1, len(rows)) / 3 + 3, 4))
    width = 0.8 / len(rows)
    for index, row in enumerate(rows):
        heights = [
            value(_by_key(seed["runs"]).get(row["variant"]), ("hot_cpu_node_s",)) for seed in per_seed
        ] + [value(row, ("hot_cpu_node_s",))]
        axis.bar([k + index * width for k in range(len(groups))], heights, width, label=row["label"])
    axis.set_xticks([k + 0.4 - width / 2 for k in range(len(groups))], groups)
    axis.set_ylabel("CPU hot-node-seconds")
    axis.legend(fontsize=7)
    return [save(plt, figure, out / "scoreboard-hot-nodes.png")]


# scoreboard.json (with the targets), scoreboard.md and the plot.
OUTPUT = Output("scoreboard", "targets", targets, markdown, plots)
