"""Smoke runs of every benchmark entry point (issue 44), so that none can rot unseen again.

Each runs at the smallest size that still passes through all of its code, with every variant it offers:
`make bench` (bench.benchmark), `make bench-quality` (bench.quality), `make bench-rebalance`
(bench.rebalance_proof), `make bench-quiet` (bench.quiet) and the micro benchmarks. Each asserts that it
finished, that every run it reports bound its pods, and that its results hold the rows and columns
bench/README.md shows. No figure is asserted and nothing is timed.

They start at once, each a process of its own with its own 5-node sandbox, writing into a tmp dir: the
traces and parks are replayed in real time, so their waits overlap. The quality trace (seed 2512, 1.5% of
the CPU requested) is 3 pods of 100m using 33m in all, under 1 point of one node's CPU: between its runs
the nodes are back at their background at once, not after a minute of the 1-minute rate.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NODES = 5
# Per benchmark: the module `make` runs and its smoke-sized flags (the Makefile's sizes cut down; --out
# and --workdir are added per run).
BENCHMARKS: dict[str, list[str]] = {
    "bench": [
        "bench.benchmark",
        f"--nodes={NODES}",
        "--pods=6",
        "--repeats=1",
        # promsched-baseline runs PROMSCHED_BENCH_BASELINE's operator: here this checkout's own.
        "--variants=promsched,promsched-baseline,promsched-rules,ks-default,ks-raised,null",
        "--history=60",
        # Prometheus scraping (and evaluating the rules promsched-rules reads) less often than the
        # sandbox's default, as a benchmark may ask to match kube-prometheus-stack's 30 s.
        "--scrape-interval=5",
        # make bench's BENCH_ARGS, cut down: an extra run (under py-spy where installed, arriving at
        # --rate as `--profile rate` asks), the micro.
        "--big-burst=8",
        "--profile=rate",
        "--micro",
    ],
    "quality": [
        "bench.quality",
        f"--nodes={NODES}",
        "--minutes=0.25",
        "--seed=2512",
        "--requested=0.015",
        "--history=120",
    ],
    # make bench-quality SEEDS=...: the scoreboard, one seed (its medians are its own), with the outage
    # scenario (Prometheus down 6 s in the middle of the 15 s trace) for promsched and kube-scheduler,
    # both at once (each its own process and sandbox).
    "scoreboard": [
        "bench.quality",
        f"--nodes={NODES}",
        "--minutes=0.25",
        "--seeds=2512",
        "--requested=0.015",
        "--history=120",
        "--outage-minutes=0.1",
        "--schedulers=promsched,ks-default",
        "--jobs=2",
    ],
    "rebalance": [
        "bench.rebalance_proof",
        f"--nodes={NODES}",
        "--minutes=0.3",
        "--drift-at=0.15",
        # 5 pods (2 of 500m, 3 of 2 cores) that fit 5 nodes; at the default 70%, 2 of 7 2-core pods fit none.
        "--requested=0.3",
        "--history=120",
    ],
    "quiet": [
        "bench.quiet",
        "--nodes=4",
        "--pods=4",
        "--park-minutes=0.1",
        "--sample-seconds=2",
        "--baseline-seconds=2",
        "--settle-seconds=1",
    ],
}
MICROS: dict[str, list[str]] = {
    "decide": ["bench.decide_micro", f"--nodes={NODES}", "--pods=5", "--cycle", "--profile"],
    "decide-shapes": ["bench.decide_micro", f"--nodes={NODES}", "--pods=5", "--shapes=all", "--profile"],
    "refresh": ["bench.refresh_micro", f"--nodes={NODES}", "--rounds=2", "--json"],
    "kopf": ["bench.kopf_micro", f"--nodes={NODES}", "--pods=10", "--rounds=1", "--profile"],
    "memory": ["bench.memory_micro", f"--nodes={NODES}", "--pods=10", "--top=3"],
    "query-cost": [
        "bench.query_cost",
        "--nodes=3",
        "--repeats=1",
        "--history=120",
        "--scrape-interval=30",
        "--json",
    ],
}
# Every smoke run together took 3.4 minutes on 2 shared cores; each is allowed far more before it
# counts as hung (this is a deadline, not a timed assertion).
DEADLINE_S = 540.0


@dataclass
class Launched:
    """One benchmark's process, its results folder and its log (stdout and stderr)."""

    name: str
    out: Path
    log: Path
    process: subprocess.Popen[bytes]

    def finished(self) -> str:
        """Wait for the process; fail with its log's end unless it exited 0. Returns the log."""
        try:
            code = self.process.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} still running after {DEADLINE_S:.0f} s:\n{self.tail()}")
        assert code == 0, f"{self.name} exited {code}:\n{self.tail()}"
        return self.log.read_text()

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def results(self, name: str) -> dict[str, Any]:
        document: dict[str, Any] = json.loads((self.out / name).read_text())
        return document

    def stop(self) -> None:
        """SIGTERM first: the benches take it as Ctrl-C and stop their sandbox."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _launch(name: str, argv: list[str], base: Path) -> Launched:
    out = base / name
    out.mkdir()
    log = base / f"{name}.log"
    extra = ["--out", str(out), "--workdir", str(base / "work")] if name in BENCHMARKS else []
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", *argv, *extra],
            cwd=REPO,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PROMSCHED_BENCH_BASELINE=str(REPO / "operator")),
        )
    return Launched(name, out, log, process)


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Launched]]:
    base = tmp_path_factory.mktemp("bench-smoke")
    runs: dict[str, Launched] = {}
    try:
        for name, argv in {**BENCHMARKS, **MICROS}.items():
            runs[name] = _launch(name, argv, base)
        yield runs
    finally:
        for run in runs.values():
            run.stop()


def markdown_table(text: str, first_cell: str) -> tuple[list[str], dict[str, list[str]]]:
    """The markdown table whose header starts with `first_cell`: its header and its rows by first cell."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|") and _cells(line)[0] == first_cell)
    header = _cells(lines[start])
    rows: dict[str, list[str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        rows[cells[0]] = cells[1:]
    return header, rows


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_make_bench_binds_every_pod_of_every_variant_and_mode(launched: dict[str, Launched]) -> None:
    run = launched["bench"]
    log = run.finished()
    results = run.results("results.json")
    (entry,) = results["node_counts"]
    assert entry["nodes"] == NODES
    shown = {(r["variant"], r["mode"]) for r in entry["runs"]}
    variants = ("promsched", "promsched-baseline", "promsched-rules", "ks-default", "ks-raised", "null")
    assert shown == {(variant, mode) for variant in variants for mode in ("rate", "burst")}
    # The warm-up ran first, and is not among the counted runs.
    assert "warm-up: promsched (QPS 1000/2000) rate 6 pods, not counted" in log
    assert len(entry["runs"]) == len(shown)
    for measured in [*entry["runs"], *entry["extra_runs"]]:
        assert measured["bound"] == measured["pods"], measured["label"]
    assert [r["pods"] for r in entry["extra_runs"]] == [8]
    assert {row["nodes"] for row in results["micro"]} == {NODES}

    text = (run.out / "results.md").read_text()
    assert f"## {NODES} nodes" in text
    assert entry["settings"]["scrape_seconds"] == 5
    assert "evaluated its rules every 5 s (`--scrape-interval`" in text
    assert "after a warm-up run of 6 pods not counted" in text
    header, rows = markdown_table(text, "Variant")
    assert header[:3] == ["Variant", "Mode", "Pods"]
    for column in (
        "Bound",
        "Throughput (pods/s)",
        "p50 (ms)",
        "p99 (ms)",
        "p99 of all repeats' pods (ms)",
        "Prom queries/pod",
        "Sched CPU/pod (ms)",
        "Peak RSS (MB)",
        "API server CPU/bind (ms)",
        "Sched writes/pod",
        "CPU util std (%)",
    ):
        assert column in header
    for label in (
        "promsched (QPS 1000/2000)",
        "promsched, rules (QPS 1000/2000)",
        "promsched, baseline source (QPS 1000/2000)",
        "kube-scheduler (QPS 50/100)",
        "kube-scheduler (QPS 1000/2000)",
        "null binder",
    ):
        assert label in rows
    assert "*promsched (QPS 1000/2000) / kube-scheduler (QPS 1000/2000)*" in rows
    assert "*promsched (QPS 1000/2000) / promsched, baseline source (QPS 1000/2000)*" in rows
    assert f"promsched, baseline source (QPS 1000/2000) from {REPO / 'operator'} at commit" in text
    assert "promsched's event loop lag over the run, p99" in text
    for section in ("## Targets", "## The decision alone, offline"):
        assert section in text


QUALITY_LABELS = (
    "promsched, estimation on",
    "promsched, estimation off",
    "promsched, p90 over the window",
    "kube-scheduler, default profile",
    "Trimaran TargetLoadPacking",
    "Trimaran LoadVariationRiskBalancing",
)


def test_make_bench_quality_replays_the_trace_through_every_scheduler(launched: dict[str, Launched]) -> None:
    run = launched["quality"]
    run.finished()
    results = run.results("quality.json")
    pods = results["trace"]["pods"]
    assert pods > 0
    assert [r["label"] for r in results["runs"]] == list(QUALITY_LABELS)
    nodes = {f"node-{i}" for i in range(NODES)}
    for measured in results["runs"]:
        assert (measured["pods_bound"], measured["pending_at_end"]) == (pods, 0), measured["label"]
        assert measured["errors"] == []
        # Every node's CPU and memory per step, as the docs say quality.json holds.
        assert set(measured["cpu_grid"]) == set(measured["memory_grid"]) == nodes
    assert {target["target"] for target in results["targets"]}

    text = (run.out / "quality.md").read_text()
    header, rows = markdown_table(text, "")
    ratios = ["promsched / kube-scheduler", "promsched / better Trimaran"]
    assert header == ["", *QUALITY_LABELS, *ratios]
    for label in (
        "hot-node-seconds, CPU above 80%",
        "hot-node-seconds, memory above 90%",
        "p95 node CPU across nodes, mean over time, %",
        "max node CPU across nodes, mean over time, %",
        "std of node CPU across nodes, mean over time",
        "std of node memory across nodes, mean over time",
        "pods bound",
        "pods left pending at the end",
        "waiting for a node, mean, s",
        "Prometheus queries per scheduled pod",
    ):
        assert len(rows[label]) == len(header) - 1, label
    assert rows["pods bound"][: len(QUALITY_LABELS)] == [str(pods)] * len(QUALITY_LABELS)
    assert "## Targets" in text


def test_make_bench_quality_seeds_writes_the_scoreboard_with_the_outage_rows(
    launched: dict[str, Launched],
) -> None:
    run = launched["scoreboard"]
    run.finished()
    results = run.results("scoreboard.json")
    assert results["seeds"] == [2512]
    assert len(results["policy"]["sha256"]) == 64
    (seed,) = results["per_seed"]
    pods = seed["trace"]["pods"]
    outage = results["outage"]
    assert (
        [r["variant"] for r in seed["runs"]] == [r["variant"] for r in outage] == ["promsched", "ks-default"]
    )
    for measured in [*seed["runs"], *outage]:
        assert (measured["pods_bound"], measured["pending_at_end"]) == (pods, 0), measured["label"]
        assert measured["errors"] == []
    ours = outage[0]
    # Prometheus was down, then promsched's snapshot was sampled until it was fresh again.
    assert ours["outage"]["outage_s"] > 0
    assert ours["outage"]["snapshot_ages"]
    assert ours["evictions"] == 0
    assert "estimation" in seed["runs"][0]
    assert [row["variant"] for row in results["medians"]] == ["promsched", "ks-default"]
    assert (run.out / "seed-2512" / "quality.json").exists()
    assert (run.out / "outage-seed-2512" / "quality.json").exists()

    text = (run.out / "scoreboard.md").read_text()
    for section in ("## Medians across seeds", "## Each seed", "## Prometheus outage", "## Targets"):
        assert section in text
    header, _ = markdown_table(text, "seed")
    assert header == [
        "seed",
        "scheduler",
        "CPU hot-node-s",
        "CPU std",
        "mean wait, s",
        "max wait, s",
        "pods bound",
        "left pending",
    ]
    assert "fresh again after, s" in text
    assert {target["target"] for target in results["targets"]} >= {
        "after the outage, promsched's metrics fresh again within one refresh",
        "no node blocked nor pod evicted on a stale reading",
    }


def test_make_bench_rebalance_replays_the_drift_off_and_enforced(launched: dict[str, Launched]) -> None:
    run = launched["rebalance"]
    run.finished()
    results = run.results("rebalance.json")
    pods = results["trace"]["pods"]
    assert results["settings"]["drifting"], "the smoke trace must drift a service"
    assert [r["mode"] for r in results["runs"]] == ["Off", "Enforce"]
    for measured in results["runs"]:
        assert (measured["pods_bound"], measured["pending_at_end"]) == (pods, 0), measured["mode"]
        assert measured["errors"] == []
        assert measured["budget_samples"] > 0
    assert "status" in results["verdict"]

    text = (run.out / "rebalance.md").read_text()
    header, rows = markdown_table(text, "measure")
    assert header == ["measure", "Off", "Enforce", "Enforce / Off"]
    for label in (
        "hot-node-seconds after the drift, CPU above 80%",
        "evictions (Events with reason Rebalanced)",
        "workloads that lost two pods within 10 minutes",
        "PodDisruptionBudget violations (samples)",
        "evictions refused by a PodDisruptionBudget (429)",
        "rebalance cycles run",
        "pods bound",
        "pods left pending at the end",
    ):
        assert len(rows[label]) == 3, label
    assert rows["pods bound"][:2] == [str(pods), str(pods)]
    assert "**Target**" in text


def test_make_bench_quiet_parks_and_frees_pods_for_both_schedulers(launched: dict[str, Launched]) -> None:
    run = launched["quiet"]
    run.finished()
    results = run.results("quiet.json")
    labels = ["promsched (QPS 50/100)", "kube-scheduler (QPS 50/100)"]
    assert [r["label"] for r in results["runs"]] == labels
    capacity = results["room"]["capacity"]
    for measured in results["runs"]:
        assert measured["bound_while_parked"] == 0, measured["label"]
        assert measured["freed"]["bound"] == capacity, measured["label"]

    text = (run.out / "quiet.md").read_text()
    header, rows = markdown_table(text, "")
    assert header == ["", *labels, "ratio"]
    for label in (
        "scheduling writes/min while parked (pods/status, pods/binding, events)",
        "all writes/min while parked, above the baseline",
        "scheduling writes/min, second half of the park",
        "Event objects at the end of the park",
        "occurrences they count (series.count / count)",
        "pods without a FailedScheduling Event at the end of the park",
        "Event objects once the freed pods are bound and writes settled",
        "freed pods bound",
        "bindings/s while the other half stays parked",
        "scheduler CPU while parked, % of a core",
        "kube-apiserver CPU while parked, % of a core",
    ):
        assert len(rows[label]) == 3, label
    assert rows["freed pods bound"][:2] == [str(capacity), str(capacity)]
    assert "Writes per minute while parked, by verb and resource:" in text


def test_the_micro_benchmarks_report_every_row(launched: dict[str, Launched]) -> None:
    decide = launched["decide"].finished()
    for variant in ("whole cycle", "a full collection"):
        assert variant in decide
    shapes = launched["decide-shapes"].finished()
    for shape in (
        "plain",
        "spread-zone",
        "spread-hostname",
        "anti-affinity-preferred",
        "anti-affinity-required",
        "host-port",
    ):
        assert f"{NODES} nodes, 5 pods, {shape}: " in shapes
    refresh = launched["refresh"].finished()
    for round_ in (0, 1):
        assert f"{NODES} nodes, round {round_}:" in refresh
    kopf = launched["kopf"].finished()
    for way in ("direct", "through kopf", "kopf's own"):
        assert way in kopf
    memory = launched["memory"].finished()
    for part in ("rss:", "sites:", "kopf:", "workers:"):
        assert part in memory
    costs = launched["query-cost"].finished()
    for query in ("cpu", "memory", "diskIO", "diskSpace", "network", "node_uname_info", "cpu (rules)"):
        assert f"\n{query} " in costs
    for refresh_row in ("a refresh, now:", "a refresh, before:", "a refresh, rules:"):
        assert refresh_row in costs
    assert " samples, " in costs
