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

import argparse
import asyncio
import contextlib
import json
import math
import signal
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench import quality_reporting
from bench.commanding import REPO, Report, report_line, terminate
from bench.facts import machine, revision
from bench.kubeapi import watch, watch_session
from bench.loads import skewed_profiles
from bench.namespaces import create_namespace, delete_namespace
from bench.quality_measures import PodLives, grid_of, node_measures, node_of, wait_measures
from bench.quality_trace import USAGE_ANNOTATION, Trace, TraceSettings, Workload, generate
from bench.sandboxing import stop_sandbox
from bench.scraping import prometheus_queries
from bench.variants import Variant, policy_spec, start_variant
from promsched.kube.configuring import from_kubeconfig
from promsched.kube.credentials import Credentials
from promsched.kube.requests import MERGE_PATCH, Request
from promsched.kube.sending import ApiError, KubeClient
from promsched.sandbox import launching
from promsched.sandbox.clusters import Sandbox, SandboxError
from promsched.sandbox.components import SANDBOX_RELEASE
from promsched.sandbox.demoing import install_crd, wait_for_metrics
from promsched.sandbox.exporting import JOB
from promsched.sandbox.peers import Trimaran, TrimaranPlugin, TrimaranSettings, start_trimaran
from promsched.sandbox.supervising import Supervisor

POLICY_NAME = "quality"
# Every scheduler at kube-scheduler's default client budget: the trace's arrivals are far below it.
SCHEDULERS = (
    Variant("promsched", "promsched, estimation on", "promsched", 50, 100),
    Variant("promsched-noest", "promsched, estimation off", "promsched", 50, 100),
    Variant("ks-default", "kube-scheduler, default profile", "kube-scheduler", 50, 100),
    Variant("trimaran-tlp", "Trimaran TargetLoadPacking", "trimaran", 50, 100),
    Variant("trimaran-lvrb", "Trimaran LoadVariationRiskBalancing", "trimaran", 50, 100),
)
# promsched's spec.estimation per variant: on, its siblings' observed usage (90th percentile over 5
# minutes); off, the requests (the default).
ESTIMATION = {"promsched": {"source": "Siblings"}, "promsched-noest": {"source": "Requests"}}
TRIMARAN: dict[str, TrimaranPlugin] = {
    "trimaran-tlp": "TargetLoadPacking",
    "trimaran-lvrb": "LoadVariationRiskBalancing",
}
# Background loads: bench.loads' right-skewed profiles, CPU and memory scaled down so that the
# trace's usage on top of them leaves a mean node below the hot thresholds (a scheduler can then avoid
# hot nodes, and whether it does is the measure).
BACKGROUND_SCALE = {"cpu": 0.6, "memory": 0.7}
MEMORY_QUERY = (
    f'100 * (1 - node_memory_MemAvailable_bytes{{job="{JOB}"}} / node_memory_MemTotal_bytes{{job="{JOB}"}})'
)
QUERY_HANDLERS = ("/api/v1/query", "/api/v1/query_range")
BACK_AT_BACKGROUND = 1.0  # percentage points: a node is cleared when this close to its background


def cpu_query(window: str) -> str:
    """Node CPU busy percent: a rate of the idle counter over `window`."""
    idle = f'node_cpu_seconds_total{{job="{JOB}",mode="idle"}}'
    return f"100 * (1 - avg by (instance) (rate({idle}[{window}])))"


@dataclass(frozen=True)
class Settings:
    trace: TraceSettings
    schedulers: tuple[Variant, ...]
    step: float
    refresh: str
    history: float
    clear_timeout: float
    out: Path
    workdir: Path | None
    render: bool


def background_profiles(names: list[str], seed: int) -> dict[str, dict[str, float]]:
    profiles = skewed_profiles(names, seed)
    for profile in profiles.values():
        for key, scale in BACKGROUND_SCALE.items():
            profile[key] = round(profile[key] * scale, 1)
    return profiles


# The policy a user who wants fewer hot nodes would write (tuned from the first full run, where `make
# bench`'s five evenly spread plugins left 485 CPU hot-node-seconds against Trimaran TargetLoadPacking's
# 445): CPU decides, memory second, over the same 1m window the measure reads; disk and network load
# carry no weight here. No thresholds: with cpu 75 / memory 90 (docs/benchmarks/quality/
# tuned-threshold-75) hot-node-seconds fell to 90 but pods waited 2.9 s on average (20 left pending
# without estimation), since a threshold withholds room rather than placing better.
QUALITY_PLUGINS = (
    {"name": "cpu", "weight": 6, "timeRange": "1m"},
    {"name": "memory", "weight": 2, "timeRange": "0s"},
)


def quality_policy(prometheus_url: str, refresh: str, variant: Variant) -> dict[str, Any]:
    """`make bench`'s policy (bench.variants.policy_spec) with the load-focused plugins above, for this
    variant's schedulerName, with its estimation."""
    spec = policy_spec(prometheus_url, refresh)
    return {
        **spec,
        "schedulerName": variant.scheduler_name,
        "estimation": ESTIMATION[variant.key],
        "plugins": [dict(plugin) for plugin in QUALITY_PLUGINS],
    }


# ----- the trace's objects ------------------------------------------------------------------------------


def pod_template(workload: Workload, scheduler_name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "labels": {"app": workload.name, "promsched.io/bench-kind": workload.kind},
            "annotations": {USAGE_ANNOTATION: workload.usage.annotation()},
        },
        "spec": {
            "schedulerName": scheduler_name,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {
                            "cpu": f"{workload.cpu_request_milli}m",
                            "memory": str(workload.memory_request_bytes),
                        }
                    },
                }
            ],
        },
    }


def workload_object(workload: Workload, namespace: str, scheduler_name: str, replicas: int) -> dict[str, Any]:
    """A workload as a ReplicaSet: the controller-manager creates its pods, which carry the controller
    ownerReference that makes them siblings. A batch job too: kwok's pod stages complete a Job's pods
    within a second of running, so a job is a ReplicaSet the trace deletes when the job ends."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": workload.name,
            "namespace": namespace,
            "labels": {"app": workload.name, "promsched.io/bench-kind": workload.kind},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": workload.name}},
            "template": pod_template(workload, scheduler_name),
        },
    }


async def _act(client: KubeClient, request: Request, errors: list[str]) -> None:
    try:
        await client.send(request)
    except (ApiError, OSError, TimeoutError) as error:
        errors.append(f"{request.method} {request.path}: {error}"[:300])


async def _follow(
    session: aiohttp.ClientSession, client: KubeClient, namespace: str, lives: PodLives
) -> None:
    """Watch the namespace's pods into `lives`; after a broken watch, catch up from a listing (pods gone
    from it are taken as deleted then)."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    version = ""
    while True:
        listing = await client.send(Request("GET", path))
        now = time.time()
        present = set()
        for pod in listing["items"]:
            present.add(pod["metadata"]["name"])
            lives.observe("ADDED", pod, now)
        for name in set(lives.first_seen) - present - set(lives.gone):
            lives.gone[name] = now
        version = listing["metadata"]["resourceVersion"]
        with contextlib.suppress(RuntimeError, aiohttp.ClientError, TimeoutError, ValueError):
            async for kind, pod in watch(session, path, {"resourceVersion": version}):
                lives.observe(kind, pod, time.time())
        await asyncio.sleep(0.5)


async def replay(
    credentials: Credentials, namespace: str, trace: Trace, scheduler_name: str
) -> dict[str, Any]:
    """Replay the trace in real time; returns the window (Unix seconds), the pods' lives and any failed
    requests."""
    lives = PodLives()
    errors: list[str] = []
    by_name = {workload.name: workload for workload in trace.workloads}
    async with KubeClient(credentials, timeout=60) as client, watch_session(credentials) as session:
        follower = asyncio.create_task(_follow(session, client, namespace, lives))
        loop = asyncio.get_running_loop()
        origin, start = loop.time(), time.time()
        actions = []
        for event in trace.events:
            delay = origin + event.at_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            workload = by_name[event.workload]
            collection = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
            if event.action == "create":
                body = workload_object(workload, namespace, scheduler_name, event.replicas)
                request = Request("POST", collection, body)
            elif event.action == "scale":
                body = {"spec": {"replicas": event.replicas}}
                request = Request("PATCH", f"{collection}/{workload.name}", body, MERGE_PATCH)
            else:
                params = {"propagationPolicy": "Background"}
                request = Request("DELETE", f"{collection}/{workload.name}", params=params)
            actions.append(asyncio.create_task(_act(client, request, errors)))
        await asyncio.sleep(max(0.0, origin + trace.duration_s - loop.time()))
        end = time.time()
        await asyncio.gather(*actions)
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await follower
    return {"start": start, "end": end, "lives": lives, "errors": errors}


# ----- Prometheus ---------------------------------------------------------------------------------------


def _prometheus(url: str, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
    data = urllib.parse.urlencode(params).encode()
    with urllib.request.urlopen(f"{url}{path}", data=data, timeout=60) as response:
        result: list[dict[str, Any]] = json.load(response)["data"]["result"]
    return result


def node_grids(url: str, start: float, end: float, step: float) -> dict[str, dict[str, list[float]]]:
    """Node CPU and memory (percent) over [start, end] on steps of `step`. CPU is a rate over 5 scrapes
    (10 s), close to what the node used at each step."""
    steps = int((end - start) // step) + 1
    grids = {}
    for key, query in (("cpu", cpu_query("10s")), ("memory", MEMORY_QUERY)):
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        grids[key] = grid_of(_prometheus(url, "/api/v1/query_range", params), start, step, steps)
    return grids


def wait_background(url: str, profiles: dict[str, dict[str, float]], timeout: float) -> float:
    """Wait until every node's CPU (rate over 1 minute, promsched's window) and memory are back within
    BACK_AT_BACKGROUND of its background; returns the seconds waited. Raises past `timeout`."""
    started = time.monotonic()
    off: dict[str, float] = {}
    while time.monotonic() - started < timeout:
        off = {}
        for key, query in (("cpu", cpu_query("1m")), ("memory", MEMORY_QUERY)):
            for series in _prometheus(url, "/api/v1/query", {"query": query}):
                node = node_of(series["metric"]["instance"])
                distance = abs(float(series["value"][1]) - profiles[node][key])
                if distance > BACK_AT_BACKGROUND:
                    off[f"{node} {key}"] = distance
        if not off:
            return time.monotonic() - started
        time.sleep(5)
    worst = sorted(off.items(), key=lambda item: -item[1])[:5]
    raise SandboxError(f"node series not back at their background after {timeout:.0f} s: {worst}")


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
        policy = {
            "apiVersion": "promsched.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": POLICY_NAME},
            "spec": quality_policy(sandbox.prometheus_url, settings.refresh, variant),
        }
        sandbox.kubectl("apply", "-f", "-", input=json.dumps(policy))
        start_variant(sandbox, variant, report)
        wait_for_metrics(sandbox, POLICY_NAME)
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
            sandbox.kubectl("delete", "schedulingpolicy", POLICY_NAME, "--ignore-not-found")
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
    base = settings.workdir or Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix=f"promsched-quality-{nodes}-", dir=base))
    names = [f"node-{i}" for i in range(nodes)]
    profiles = background_profiles(names, settings.trace.seed)
    profiles_file = directory / "quality-profiles.yaml"
    profiles_file.write_text(yaml.safe_dump({"nodes": profiles}, sort_keys=False))
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
        "kubernetes": SANDBOX_RELEASE,
        "machine": machine(),
        "revision": revision(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "runs": [],
    }
    started = time.monotonic()
    with sandbox_for_trace(
        directory, nodes, profiles_file, settings.history, settings.out / "logs-quality", report
    ) as (
        sandbox,
        credentials,
    ):
        results["sandbox_up_s"] = time.monotonic() - started
        for variant in settings.schedulers:
            results["runs"].append(run_one(sandbox, credentials, variant, trace, profiles, settings, report))
            results["wall_s"] = time.monotonic() - started
            quality_reporting.write(results, settings.out, plots_too=False)
    results["wall_s"] = time.monotonic() - started
    return results


@contextlib.contextmanager
def sandbox_for_trace(
    directory: Path, nodes: int, profiles_file: Path, history: float, logs: Path, report: Report
) -> Iterator[tuple[Sandbox, Credentials]]:
    """A sandbox of `nodes` with the CRD installed and its credentials; stopped (logs kept) at the end."""
    try:
        report(f"== {nodes} nodes: starting a sandbox in {directory}")
        sandbox = launching.up(
            directory, nodes=nodes, profiles_file=profiles_file, history=history, report=report
        )
        install_crd(sandbox)
        yield sandbox, from_kubeconfig(sandbox.kubeconfig)
    finally:
        report(f"== {nodes} nodes: stopping the sandbox")
        stop_sandbox(directory, logs)


def _parse_args(argv: list[str] | None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--minutes", type=float, default=10.0, help="trace length (default 10)")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument(
        "--requested", type=float, default=0.70, help="share of the cluster's CPU requested at the end"
    )
    known = {variant.key: variant for variant in SCHEDULERS}
    parser.add_argument("--schedulers", default=",".join(known), help=",".join(known))
    parser.add_argument("--step", type=float, default=5.0, help="seconds between measured samples")
    parser.add_argument("--refresh", default="15s", help="promsched's refreshInterval (default 15s)")
    parser.add_argument("--history", type=float, default=600.0, help="seconds of backfilled metrics")
    parser.add_argument("--clear-timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--workdir", type=Path, help="where the sandbox goes (default: the temp dir)")
    parser.add_argument("--render", action="store_true", help="only rewrite quality.md and plots")
    args = parser.parse_args(argv)
    unknown = [key for key in args.schedulers.split(",") if key and key not in known]
    if unknown:
        parser.error(f"--schedulers: unknown {', '.join(unknown)}; use {', '.join(known)}")
    try:
        trace = TraceSettings(
            nodes=args.nodes, minutes=args.minutes, seed=args.seed, requested_at_end=args.requested
        )
    except ValueError as error:
        parser.error(str(error))
    return Settings(
        trace=trace,
        schedulers=tuple(known[key] for key in args.schedulers.split(",") if key),
        step=args.step,
        refresh=args.refresh,
        history=args.history,
        clear_timeout=args.clear_timeout,
        out=args.out.resolve(),
        workdir=args.workdir,
        render=args.render,
    )


def main(argv: list[str] | None = None) -> int:
    settings = _parse_args(argv)
    signal.signal(signal.SIGTERM, terminate)
    settings.out.mkdir(parents=True, exist_ok=True)
    if settings.render:
        stored: dict[str, Any] = json.loads((settings.out / "quality.json").read_text())
        print(quality_reporting.write(stored, settings.out, plots_too=True))
        return 0
    results = bench(settings, report_line)
    print(quality_reporting.write(results, settings.out, plots_too=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
