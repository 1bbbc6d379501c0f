"""`make bench-quiet`: what pods that fit nowhere cost the API server, promsched beside kube-scheduler.

    python -m bench.quiet [--nodes 100] [--pods 2000] [--park-minutes 10] [--sample-seconds 15]
                          [--schedulers promsched,ks-default] [--out bench/results] [--render]

One sandbox whose nodes all carry the taint PARK_TAINT, so a pod without its toleration fits nowhere.
After a baseline (the API server's write counters with no scheduler running), for each scheduler in turn,
started fresh in a namespace of its own that is deleted before the next:

1. create `--pods` pods naming the scheduler; each requests 1/k of a node's CPU (k = `Room.per_node`);
2. leave them parked `--park-minutes`, reading the API server's `apiserver_request_total` every
   `--sample-seconds`;
3. free room for half of them: remove the taint from `Room.nodes` nodes (kube-scheduler's queue moves
   the pods its TaintToleration plugin rejected on that node update); wait until that many are bound;
4. stop the scheduler, delete the namespace, taint the nodes again.

It reports writes per minute by verb and resource while parked, the Event objects created, the time from
freeing room to binding (median, max), and the bindings per second while the other half stays parked.
Results go to OUT/quiet.json, OUT/quiet.md and OUT/quiet.png (with matplotlib).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import signal
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench import quiet_reporting
from bench.commanding import REPO, Report, report_line, terminate
from bench.facts import machine, revision
from bench.kubeapi import cpu_seconds, read_counts, watch_session
from bench.loads import allocatable
from bench.namespaces import create_namespace, delete_namespace
from bench.pods import CREATE_CONCURRENCY, PodTimes, catch_up, create_pod, follow, pod_manifest
from bench.quality_measures import percentile
from bench.requestcounts import (
    Counts,
    RequestKey,
    by_label,
    difference,
    event_occurrences,
    net_of_baseline,
    per_minute,
    regarded,
    scheduling_total,
    writes,
)
from bench.sandboxing import stop_sandbox
from bench.variants import VARIANTS, Variant, apply_policy, start_variant
from promsched.kube.configuring import from_kubeconfig
from promsched.kube.credentials import Credentials
from promsched.kube.requests import MERGE_PATCH, Request
from promsched.kube.sending import KubeClient, list_all
from promsched.sandbox import launching
from promsched.sandbox.clusters import Sandbox
from promsched.sandbox.components import SANDBOX_RELEASE
from promsched.sandbox.supervising import Supervisor

PARK_TAINT = {"key": "promsched.io/bench-parked", "value": "true", "effect": "NoSchedule"}
MAX_PODS_PER_NODE = 110  # the sandbox nodes' allocatable pods
# The benchmark's own writes while it measures: its pod creates and the node patches that free room.
OWN_WRITES = (RequestKey("POST", "", "pods"), RequestKey("PATCH", "", "nodes"))
# Both at kube-scheduler's default client budget (50/100): the writes they make are the measure.
_BY_KEY = {variant.key: variant for variant in VARIANTS}
SCHEDULERS = {
    "promsched": dataclasses.replace(_BY_KEY["promsched"], label="promsched (QPS 50/100)", qps=50, burst=100),
    "ks-default": _BY_KEY["ks-default"],
}


@dataclass(frozen=True)
class Settings:
    nodes: int
    pods: int
    park_minutes: float
    sample_seconds: float
    baseline_seconds: float
    free_timeout: float
    settle_seconds: float
    schedulers: tuple[Variant, ...]
    out: Path
    workdir: Path | None
    render: bool


@dataclass(frozen=True)
class Room:
    """How room is freed for half the pods: `nodes` nodes lose the taint; each then fits `per_node`
    pods of `cpu_milli` millicores (and no more), `capacity` pods in all."""

    nodes: tuple[str, ...]
    per_node: int
    cpu_milli: int

    @property
    def capacity(self) -> int:
        return len(self.nodes) * self.per_node


def plan_room(pods: int, node_names: list[str], allocatable_milli: int) -> Room:
    """Room for half of `pods` (rounded up to whole nodes) on at most half the nodes, every freed node
    filled exactly: a pod's CPU request is allocatable/per_node, so per_node + 1 pods do not fit."""
    half = pods // 2
    if half < 1 or len(node_names) < 2:
        raise ValueError("--pods must be at least 2 and --nodes at least 2: half the pods get room")
    freed = min(len(node_names) // 2, half)
    per_node = math.ceil(half / freed)
    cpu_milli = allocatable_milli // per_node
    if per_node > MAX_PODS_PER_NODE or cpu_milli * (per_node + 1) <= allocatable_milli:
        raise ValueError(
            f"--pods {pods} on --nodes {len(node_names)}: {per_node} pods per freed node cannot fill it "
            f"exactly; raise --nodes to at least {2 * math.ceil(half / 40)}"
        )
    return Room(tuple(node_names[: math.ceil(half / per_node)]), per_node, cpu_milli)


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    phase: str
    counts: Counts
    scheduler_cpu: float = 0.0  # CPU seconds used so far, all threads
    apiserver_cpu: float = 0.0


@dataclass
class Run:
    """What one scheduler's run observed, before it is summarised."""

    variant: Variant
    room: Room
    pods: int
    scheduler_pid: int = 0
    apiserver_pid: int = 0
    scheduler_metrics_url: str | None = None  # promsched's /metrics; kube-scheduler's is not read
    times: PodTimes = field(default_factory=PodTimes)
    samples: list[Sample] = field(default_factory=list)
    created_at: float = 0.0
    freed_at: float = 0.0
    events_parked: list[dict[str, Any]] = field(default_factory=list)
    events_end: list[dict[str, Any]] = field(default_factory=list)
    # promsched_api_writes_dropped_total by kind, at the end of the park and at the end.
    dropped_parked: dict[str, float] = field(default_factory=dict)
    dropped_end: dict[str, float] = field(default_factory=dict)

    def sample(self, phase: str) -> Sample:
        return next(s for s in self.samples if s.phase == phase)


# ----- the API server's counters and the nodes' taints ---------------------------------------------------


def read_dropped(url: str | None) -> dict[str, float]:
    """promsched's count of the informational writes (events, conditions) it dropped, by kind."""
    if url is None:
        return {}
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return by_label(response.read().decode(), "promsched_api_writes_dropped_total", "kind")


def taint_patch(node: str, parked: bool) -> Request:
    """The node's taints as the sandbox made them: PARK_TAINT alone, or none."""
    body = {"spec": {"taints": [PARK_TAINT] if parked else []}}
    return Request("PATCH", f"/api/v1/nodes/{node}", body, MERGE_PATCH)


def measure_baseline(credentials: Credentials, seconds: float) -> tuple[Counts, float]:
    """The write counters' growth over `seconds` with no scheduler running, and the seconds measured."""

    async def measure() -> tuple[Counts, float]:
        async with watch_session(credentials) as session:
            start, before = time.monotonic(), await read_counts(session)
            await asyncio.sleep(seconds)
            return difference(before, await read_counts(session)), time.monotonic() - start

    return asyncio.run(measure())


# ----- one scheduler's run ------------------------------------------------------------------------------


async def park_and_free(credentials: Credentials, namespace: str, run: Run, settings: Settings) -> None:
    """Create the pods, leave them parked, free room for half, wait for those to be bound."""
    times = run.times
    enough = asyncio.Event()

    def check_bound() -> None:
        if len(times.bound) >= min(run.room.capacity, run.pods - times.failed_creates):
            enough.set()

    async with (
        KubeClient(credentials, timeout=60, connections=CREATE_CONCURRENCY) as client,
        watch_session(credentials) as session,
    ):

        async def sample(phase: str) -> None:
            counts = await read_counts(session)
            cpu = cpu_seconds(run.scheduler_pid), cpu_seconds(run.apiserver_pid)
            run.samples.append(Sample(time.monotonic(), phase, counts, *cpu))

        async def sample_until(deadline: float, phase: str, done: asyncio.Event | None = None) -> None:
            while time.monotonic() < deadline and not (done and done.is_set()):
                wait = min(settings.sample_seconds, deadline - time.monotonic())
                if done is None:
                    await asyncio.sleep(wait)
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(done.wait(), wait)
                    if not done.is_set() and time.monotonic() - times.last_event > 5.0:
                        await catch_up(client, namespace, times, check_bound)  # a silently stalled watch
                await sample(phase)

        listing = await client.send(Request("GET", f"/api/v1/namespaces/{namespace}/pods"))
        connected = asyncio.Event()
        version = listing["metadata"]["resourceVersion"]
        follower = asyncio.create_task(
            follow(client, session, namespace, version, times, connected, check_bound)
        )
        try:
            await asyncio.wait_for(connected.wait(), 30)
            await sample("start")
            times.started = time.monotonic()
            slots = asyncio.Semaphore(CREATE_CONCURRENCY)
            scheduler = run.variant.scheduler_name
            cpu = f"{run.room.cpu_milli}m"

            async def create(name: str) -> None:
                async with slots:
                    await create_pod(client, pod_manifest(namespace, name, scheduler, cpu), times)

            await asyncio.gather(*(create(f"parked-{i:05d}") for i in range(run.pods)))
            run.created_at = time.monotonic()
            await sample("created")
            await sample_until(run.created_at + 60 * settings.park_minutes, "parked")
            run.events_parked = await list_all(client, f"/api/v1/namespaces/{namespace}/events")
            run.dropped_parked = await asyncio.to_thread(read_dropped, run.scheduler_metrics_url)
            await sample("park-end")
            run.freed_at = time.monotonic()
            await asyncio.gather(*(client.send(taint_patch(node, parked=False)) for node in run.room.nodes))
            times.last_event = time.monotonic()
            check_bound()
            await sample_until(run.freed_at + settings.free_timeout, "freeing", enough)
            await sample("bound")
            # The writes a scheduler queues behind its bindings (events, conditions) land in this window.
            await sample_until(time.monotonic() + settings.settle_seconds, "settling")
            run.events_end = await list_all(client, f"/api/v1/namespaces/{namespace}/events")
            run.dropped_end = await asyncio.to_thread(read_dropped, run.scheduler_metrics_url)
            await sample("end")
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await follower


async def retaint(credentials: Credentials, nodes: tuple[str, ...]) -> None:
    async with KubeClient(credentials) as client:
        await asyncio.gather(*(client.send(taint_patch(node, parked=True)) for node in nodes))


def run_scheduler(
    sandbox: Sandbox,
    credentials: Credentials,
    variant: Variant,
    room: Room,
    settings: Settings,
    baseline: Counts,
    report: Report,
) -> dict[str, Any]:
    namespace = f"quiet-{variant.key}"
    wall = time.monotonic()
    asyncio.run(create_namespace(credentials, namespace))
    run = Run(variant, room, settings.pods)
    try:
        run.scheduler_pid, run.scheduler_metrics_url = start_variant(sandbox, variant, report)
        apiserver = Supervisor(sandbox.directory).get("kube-apiserver")
        run.apiserver_pid = apiserver.pid if apiserver else 0
        report(f"  {variant.label}: {settings.pods} pods parked for {settings.park_minutes:g} min")
        asyncio.run(park_and_free(credentials, namespace, run, settings))
    finally:
        Supervisor(sandbox.directory).stop(variant.process)
        asyncio.run(delete_namespace(credentials, namespace))
        asyncio.run(retaint(credentials, room.nodes))
    result = summarise(run, baseline)
    result["wall_s"] = time.monotonic() - wall
    park, freed = result["park"], result["freed"]
    report(
        f"  {variant.label}: {park['scheduling_writes_per_minute']:.0f} scheduling writes/min parked "
        f"({park['net_writes_per_minute']:.0f} all writes/min above baseline), "
        f"{result['events']['objects_parked']} events; freed {freed['bound']}/{room.capacity} bound, "
        f"median {freed['median_s']:.1f} s, max {freed['max_s']:.1f} s, {freed['binds_per_second']:.1f}/s"
    )
    return result


def summarise(run: Run, baseline_per_minute: Counts) -> dict[str, Any]:
    """The figures of one run from its samples, its pods' binding times and its Events."""
    start, created, park_end, bound, end = (
        run.sample(phase) for phase in ("start", "created", "park-end", "bound", "end")
    )
    park_s = park_end.at - start.at
    park = writes(difference(start.counts, park_end.counts))
    park_rates = per_minute(park, park_s)
    # The steady state: the second half of the park, once the first attempts are long written.
    middle = created.at + (park_end.at - created.at) / 2
    steady = next((s for s in run.samples if s.at >= middle and s.phase == "parked"), park_end)
    steady_s = park_end.at - steady.at
    steady_writes = writes(difference(steady.counts, park_end.counts))
    free_writes = writes(difference(park_end.counts, bound.counts))
    settle_writes = writes(difference(bound.counts, end.counts))
    bound_parked = [name for name, at in run.times.bound.items() if at < run.freed_at]
    to_bind = sorted(at - run.freed_at for at in run.times.bound.values() if at >= run.freed_at)
    bound_at = sorted(at for at in run.times.bound.values() if at >= run.freed_at)
    binding_span = bound_at[-1] - bound_at[0] if len(bound_at) > 1 else math.nan
    return {
        "variant": run.variant.key,
        "label": run.variant.label,
        "pods": run.pods,
        "failed_creates": run.times.failed_creates,
        "create_s": created.at - start.at,
        "park_s": park_s,
        "park": {
            "writes_per_minute": {k.label: v for k, v in sorted(park_rates.items())},
            "writes": {k.label: v for k, v in sorted(park.items())},
            "scheduling_writes": scheduling_total(park),
            "scheduling_writes_per_minute": scheduling_total(park_rates),
            "net_writes_per_minute": net_of_baseline(park_rates, baseline_per_minute, OWN_WRITES),
            "steady_s": steady_s,
            "steady_scheduling_writes_per_minute": scheduling_total(per_minute(steady_writes, steady_s)),
            "steady_net_writes_per_minute": net_of_baseline(
                per_minute(steady_writes, steady_s), baseline_per_minute, OWN_WRITES
            ),
            # Shares of one core, percent.
            "scheduler_cpu_percent": _cpu_percent(start, park_end, "scheduler_cpu"),
            "steady_scheduler_cpu_percent": _cpu_percent(steady, park_end, "scheduler_cpu"),
            "apiserver_cpu_percent": _cpu_percent(start, park_end, "apiserver_cpu"),
            "steady_apiserver_cpu_percent": _cpu_percent(steady, park_end, "apiserver_cpu"),
        },
        "events": {
            "objects_parked": len(run.events_parked),
            "pods_without_failed_scheduling_parked": run.pods
            - run.times.failed_creates
            - len(regarded(run.events_parked, "FailedScheduling")),
            "occurrences_parked": event_occurrences(run.events_parked),
            "objects_end": len(run.events_end),
            "occurrences_end": event_occurrences(run.events_end),
        },
        "bound_while_parked": len(bound_parked),
        # None for a scheduler whose drops are not read (kube-scheduler's).
        "writes_dropped_parked": sum(run.dropped_parked.values()) if run.scheduler_metrics_url else None,
        "writes_dropped_end": sum(run.dropped_end.values()) if run.scheduler_metrics_url else None,
        "writes_dropped_by_kind": run.dropped_end,
        "freed": {
            "capacity": run.room.capacity,
            "bound": len(to_bind),
            "first_s": to_bind[0] if to_bind else math.nan,
            "median_s": percentile(to_bind, 0.5),
            "p90_s": percentile(to_bind, 0.9),
            "max_s": to_bind[-1] if to_bind else math.nan,
            "binds_per_second": (len(bound_at) - 1) / binding_span if binding_span > 0 else math.nan,
            "scheduling_writes": scheduling_total(free_writes),
            "writes": {k.label: v for k, v in sorted(free_writes.items())},
            "wait_s": bound.at - run.freed_at,
        },
        "settle": {
            "s": end.at - bound.at,
            "scheduling_writes": scheduling_total(settle_writes),
            "writes": {k.label: v for k, v in sorted(settle_writes.items())},
        },
        "late_binds": run.times.late_binds,
        "watch_restarts": run.times.watch_restarts,
        "free_at_s": run.freed_at - start.at,
        # (seconds since the first create, the scheduling writes counter then): the plot's rates.
        "series": [[round(s.at - start.at, 3), scheduling_total(s.counts)] for s in run.samples],
    }


def _cpu_percent(first: Sample, last: Sample, process: str) -> float:
    seconds = last.at - first.at
    used: float = getattr(last, process) - getattr(first, process)
    return 100.0 * used / seconds if seconds > 0 else math.nan


# ----- entry point --------------------------------------------------------------------------------------


def _parse_args(argv: list[str] | None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100, help="sandbox nodes (default 100)")
    parser.add_argument("--pods", type=int, default=2000, help="pods that fit nowhere (default 2000)")
    parser.add_argument("--park-minutes", type=float, default=10.0, help="minutes parked (default 10)")
    parser.add_argument("--sample-seconds", type=float, default=15.0, help="between counter readings")
    parser.add_argument(
        "--baseline-seconds", type=float, default=60.0, help="counters read with no scheduler (default 60)"
    )
    parser.add_argument(
        "--free-timeout", type=float, default=300.0, help="seconds to wait for the freed pods' bindings"
    )
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=30.0,
        help="seconds counted after the last freed pod is bound, before the Events are counted (default 30)",
    )
    parser.add_argument(
        "--schedulers", default=",".join(SCHEDULERS), help="promsched,ks-default (in this order)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--workdir", type=Path, help="where the sandbox goes (default: the temp dir)")
    parser.add_argument("--render", action="store_true", help="only rewrite quiet.md and quiet.png")
    args = parser.parse_args(argv)
    unknown = [key for key in args.schedulers.split(",") if key and key not in SCHEDULERS]
    if unknown:
        parser.error(f"--schedulers: {', '.join(unknown)} unknown; use {', '.join(SCHEDULERS)}")
    if args.park_minutes <= 0 or args.sample_seconds <= 0:
        parser.error("--park-minutes and --sample-seconds must be positive")
    return Settings(
        nodes=args.nodes,
        pods=args.pods,
        park_minutes=args.park_minutes,
        sample_seconds=args.sample_seconds,
        baseline_seconds=args.baseline_seconds,
        free_timeout=args.free_timeout,
        settle_seconds=args.settle_seconds,
        schedulers=tuple(SCHEDULERS[key] for key in args.schedulers.split(",") if key),
        out=args.out.resolve(),
        workdir=args.workdir,
        render=args.render,
    )


def bench_quiet(settings: Settings, report: Report) -> dict[str, Any]:
    names = [f"node-{i}" for i in range(settings.nodes)]
    room = plan_room(settings.pods, names, allocatable()[0])
    base = settings.workdir or Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix=f"promsched-quiet-{settings.nodes}-", dir=base))
    profiles_file = directory / "quiet-profiles.yaml"
    profiles_file.write_text(yaml.safe_dump({"nodes": {name: {"taints": [PARK_TAINT]} for name in names}}))
    runs = []
    try:
        report(
            f"== {settings.nodes} nodes, all tainted {PARK_TAINT['key']}: starting a sandbox in {directory}"
        )
        sandbox = launching.up(directory, nodes=settings.nodes, profiles_file=profiles_file, report=report)
        credentials = from_kubeconfig(sandbox.kubeconfig)
        apply_policy(sandbox, "15s")
        report(f"  baseline: {settings.baseline_seconds:g} s of the API server's counters, no scheduler")
        grown, seconds = measure_baseline(credentials, settings.baseline_seconds)
        baseline = per_minute(writes(grown), seconds)
        for variant in settings.schedulers:
            runs.append(run_scheduler(sandbox, credentials, variant, room, settings, baseline, report))
    finally:
        report("== stopping the sandbox")
        stop_sandbox(directory, settings.out / "logs-quiet")
    return {
        "room": {**asdict(room), "nodes": len(room.nodes), "capacity": room.capacity},
        "baseline": {
            "seconds": seconds,
            "writes_per_minute": {k.label: v for k, v in sorted(baseline.items())},
        },
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    settings = _parse_args(argv)
    signal.signal(signal.SIGTERM, terminate)
    settings.out.mkdir(parents=True, exist_ok=True)
    stored = settings.out / "quiet.json"
    if settings.render:
        print(quiet_reporting.write(json.loads(stored.read_text()), settings.out, report_line))
        return 0
    started = time.monotonic()
    results: dict[str, Any] = {
        "command": " ".join(["python -m bench.quiet", *(sys.argv[1:] if argv is None else argv)]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {
            **{
                k: v
                for k, v in asdict(settings).items()
                if k not in ("schedulers", "out", "workdir", "render")
            },
            "schedulers": [v.key for v in settings.schedulers],
            "taint": PARK_TAINT,
        },
        "kubernetes": SANDBOX_RELEASE,
        "machine": machine(),
        "revision": revision(),
    }
    results.update(bench_quiet(settings, report_line))
    results["wall_s"] = time.monotonic() - started
    print(quiet_reporting.write(results, settings.out, report_line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
