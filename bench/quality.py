"""`make bench-quality`: who leaves the cluster hotter, replaying one workload through each scheduler.

    python -m bench.quality [--nodes 100] [--minutes 10] [--seed 15] [--step 5]
                            [--schedulers promsched,promsched-noest,ks-default,trimaran-tlp,trimaran-lvrb]
                            [--out bench/results] [--render]

One sandbox whose pods use what their `sandbox.promsched.io/usage` annotation says (the closed-loop
exporter adds a running pod's usage to its node's series), with skewed background loads
(`background_profiles`). The trace (`bench.quality_trace`: services that grow, batch jobs that end, all
as ReplicaSets) is replayed in real time against each scheduler in turn, in a namespace of its own,
with the scheduler started fresh; then the namespace is deleted and the benchmark waits until every
node's series are back at their background before the next.

Measured over each run's window from the sandbox's own Prometheus (`bench.quality_measures`): hot-node-
seconds (CPU above 80%, memory above 90%), p95 and maximum node CPU over time, the spread of node CPU and
memory, how long pods waited for a node and how many were left pending, and Prometheus queries per
scheduled pod. Results go to OUT/quality.json, OUT/quality.md and OUT/quality-*.png.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import yaml

from bench import commanding, quality_reporting, trace_benches
from bench.commanding import REPO, Report, report_line
from bench.facts import measured_on
from bench.namespaces import create_namespace, delete_namespace
from bench.quality_measures import node_measures, wait_measures
from bench.quality_querying import node_grids, wait_background
from bench.quality_replaying import replay
from bench.quality_trace import Trace, generate
from bench.sandboxing import prepare, sandbox_for_trace
from bench.scraping import prometheus_queries
from bench.variants import Variant, start_variant
from promsched.kube.credentials import Credentials
from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor
from promsched.sandbox.demoing import wait_for_metrics
from promsched.sandbox.peers import Trimaran, TrimaranPlugin, TrimaranSettings, start_trimaran

# Every scheduler at kube-scheduler's default client budget: the trace's arrivals are far below it.
SCHEDULERS = (
    Variant("promsched", "promsched, estimation on", "promsched", 50, 100),
    Variant("promsched-noest", "promsched, estimation off", "promsched", 50, 100),
    Variant("ks-default", "kube-scheduler, default profile", "kube-scheduler", 50, 100),
    Variant("trimaran-tlp", "Trimaran TargetLoadPacking", "trimaran", 50, 100),
    Variant("trimaran-lvrb", "Trimaran LoadVariationRiskBalancing", "trimaran", 50, 100),
)
# The estimation-off variant counts pods at their requests (the default) rather than as the shipped
# policy does (their siblings' observed usage): the one departure from the file, which the table measures.
ESTIMATION_OFF = {"promsched-noest": {"source": "Requests"}}
TRIMARAN: dict[str, TrimaranPlugin] = {
    "trimaran-tlp": "TargetLoadPacking",
    "trimaran-lvrb": "LoadVariationRiskBalancing",
}
QUERY_HANDLERS = ("/api/v1/query", "/api/v1/query_range")


@dataclass(frozen=True)
class Settings(trace_benches.Settings):
    schedulers: tuple[Variant, ...]
    refresh: str


# The policy shipped to users who want fewer hot nodes, and the one measured: CPU decides, over the same
# 1m window the measure reads, memory second (tuned from the first full run, where `make bench`'s five
# evenly spread plugins left 485 CPU hot-node-seconds against Trimaran TargetLoadPacking's 445). No
# thresholds: with cpu 75 / memory 90 (docs/benchmarks/quality/tuned-threshold-75) hot-node-seconds fell
# to 90 but pods waited 2.9 s on average (20 left pending without estimation), since a threshold withholds
# room rather than placing better.
POLICY_FILE = REPO / "examples" / "fewer-hot-nodes.yaml"


def shipped_policy() -> dict[str, Any]:
    """examples/fewer-hot-nodes.yaml, as users get it."""
    policy: dict[str, Any] = yaml.safe_load(POLICY_FILE.read_text())
    return policy


def quality_policy(prometheus_url: str, refresh: str, variant: Variant) -> dict[str, Any]:
    """The shipped policy for this variant. Only what the sandbox decides is overridden: schedulerName
    (one per variant), prometheus.url (the sandbox's Prometheus) and refreshInterval (--refresh; 15s, the
    API's default, unless asked); and, for the estimation-off variant, estimation (ESTIMATION_OFF)."""
    policy = shipped_policy()
    spec = policy["spec"]
    spec["schedulerName"] = variant.scheduler_name
    spec["prometheus"] = {**spec["prometheus"], "url": prometheus_url}
    spec["refreshInterval"] = refresh
    if variant.key in ESTIMATION_OFF:
        spec["estimation"] = ESTIMATION_OFF[variant.key]
    return policy


def policy_name() -> str:
    """The SchedulingPolicy's name in the sandbox: the shipped file's."""
    name: str = shipped_policy()["metadata"]["name"]
    return name


# ----- one scheduler ------------------------------------------------------------------------------------


def _start(sandbox: Sandbox, variant: Variant, settings: Settings, report: Report) -> dict[str, Any]:
    """Start the variant's scheduler; returns what to record about it (for Trimaran, its handle)."""
    if variant.kind == "trimaran":
        trimaran_settings = TrimaranSettings(qps=variant.qps, burst=variant.burst)
        trimaran = start_trimaran(
            sandbox, TRIMARAN[variant.key], variant.scheduler_name, trimaran_settings, report
        )
        return {"trimaran": trimaran}
    if variant.kind == "promsched":
        policy = quality_policy(sandbox.prometheus_url, settings.refresh, variant)
        sandbox.kubectl("apply", "-f", "-", input=json.dumps(policy))
        start_variant(sandbox, variant, report)
        wait_for_metrics(sandbox, policy["metadata"]["name"])
    else:
        start_variant(sandbox, variant, report)
    return {}


def _trimaran_health(trimaran: Trimaran | None) -> dict[str, Any]:
    """Whether Trimaran read the nodes' metrics: its log's metric failures and the nodes it scored from
    metrics (a run without them would measure its fallback, not its plugin)."""
    if trimaran is None:
        return {}
    failures = trimaran.metrics_failures()
    return {
        "trimaran_metrics_failures": len(failures),
        "trimaran_first_failures": failures[:3],
        "trimaran_nodes_scored_from_metrics": len(trimaran.nodes_scored_from_metrics()),
    }


def run_one(
    sandbox: Sandbox,
    credentials: Credentials,
    variant: Variant,
    trace: Trace,
    profiles: dict[str, dict[str, float]],
    settings: Settings,
    report: Report,
) -> dict[str, Any]:
    namespace = f"quality-{variant.key}"
    wall = time.monotonic()
    asyncio.run(create_namespace(credentials, namespace))
    started: dict[str, Any] = {}
    try:
        started = _start(sandbox, variant, settings, report)
        report(f"  {variant.label}: replaying {len(trace.events)} events over {trace.duration_s:.0f} s")
        queries_before = prometheus_queries(sandbox.prometheus_url, QUERY_HANDLERS)
        replayed = asyncio.run(replay(credentials, namespace, trace, variant.scheduler_name))
        queries = prometheus_queries(sandbox.prometheus_url, QUERY_HANDLERS) - queries_before
    finally:
        health = _trimaran_health(started.get("trimaran"))
        Supervisor(sandbox.directory).stop(variant.process)
        if variant.kind == "promsched":
            sandbox.kubectl("delete", "schedulingpolicy", policy_name(), "--ignore-not-found")
    start, end, lives = replayed["start"], replayed["end"], replayed["lives"]
    grids = node_grids(sandbox.prometheus_url, start, end, settings.step)
    cleared = time.monotonic()
    asyncio.run(delete_namespace(credentials, namespace))
    clear_s = wait_background(sandbox.prometheus_url, profiles, settings.clear_timeout)
    measures = {**node_measures(grids["cpu"], grids["memory"], settings.step), **wait_measures(lives, end)}
    bound = measures["pods_bound"]
    result = {
        "variant": variant.key,
        "label": variant.label,
        "window": [start, end],
        **measures,
        "prometheus_queries": queries,
        "queries_per_pod": queries / bound if bound else math.nan,
        "errors": replayed["errors"],
        **health,
        "pods_per_node": _pods_per_node(lives.node, lives.gone),
        "cpu_grid": {node: [round(v, 1) for v in row] for node, row in grids["cpu"].items()},
        "memory_grid": {node: [round(v, 1) for v in row] for node, row in grids["memory"].items()},
        "clear_s": time.monotonic() - cleared,
        "back_at_background_s": clear_s,
        "wall_s": time.monotonic() - wall,
    }
    report(
        f"  {variant.label}: hot CPU {measures['hot_cpu_node_s']:.0f} node-s, memory "
        f"{measures['hot_memory_node_s']:.0f} node-s, CPU std {measures['cpu_std']:.1f}, "
        f"pending at end {measures['pending_at_end']:.0f}, queries/pod {result['queries_per_pod']:.2f}, "
        f"cleared in {result['clear_s']:.0f} s"
    )
    return result


def _pods_per_node(nodes: dict[str, str], gone: dict[str, float]) -> dict[str, int]:
    """Pods still on each node at the end of the run."""
    counts: dict[str, int] = {}
    for pod, node in nodes.items():
        if pod not in gone:
            counts[node] = counts.get(node, 0) + 1
    return dict(sorted(counts.items()))


# ----- entry point --------------------------------------------------------------------------------------


def bench(settings: Settings, report: Report) -> dict[str, Any]:
    trace = generate(settings.trace)
    nodes = settings.trace.nodes
    profiles = trace_benches.background_profiles([f"node-{i}" for i in range(nodes)], settings.trace.seed)
    directory, profiles_file = prepare(settings.workdir, "quality", nodes, profiles)
    results: dict[str, Any] = {
        "settings": {
            "trace": asdict(settings.trace),
            "schedulers": [asdict(v) for v in settings.schedulers],
            "step": settings.step,
            "refresh": settings.refresh,
            "history": settings.history,
        },
        "trace": quality_reporting.trace_summary(trace),
        "background": profiles,
        **measured_on(),
        "runs": [],
    }
    started = time.monotonic()
    logs = settings.out / "logs-quality"
    with sandbox_for_trace(directory, nodes, profiles_file, settings.history, logs, report) as (
        sandbox,
        credentials,
    ):
        results["sandbox_up_s"] = time.monotonic() - started
        for variant in settings.schedulers:
            results["runs"].append(run_one(sandbox, credentials, variant, trace, profiles, settings, report))
            results["wall_s"] = time.monotonic() - started
            trace_benches.write(results, settings.out, quality_reporting.OUTPUT, plots_too=False)
    results["wall_s"] = time.monotonic() - started
    return results


def _parse_args(argv: list[str] | None) -> Settings:
    parser = trace_benches.parser(__doc__, 100, 10.0, 15, "only rewrite quality.md and plots")
    known = {variant.key: variant for variant in SCHEDULERS}
    parser.add_argument("--schedulers", default=",".join(known), help=",".join(known))
    parser.add_argument("--refresh", default="15s", help="promsched's refreshInterval (default 15s)")
    args = parser.parse_args(argv)
    schedulers = commanding.chosen(parser, "--schedulers", args.schedulers, known)
    return Settings(**trace_benches.settings_of(parser, args), schedulers=schedulers, refresh=args.refresh)


def main(argv: list[str] | None = None) -> int:
    settings = _parse_args(argv)
    return trace_benches.main(settings, quality_reporting.OUTPUT, lambda: bench(settings, report_line))


if __name__ == "__main__":
    sys.exit(main())
