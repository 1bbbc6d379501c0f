"""One run of `make bench`: a variant's scheduler started fresh in a namespace of its own, the same pods
created at a steady rate (`rate`) or all at once (`burst`), and what the run measured."""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.commanding import Report, report_line
from bench.histograms import Buckets, added, histogram_quantile
from bench.kubeapi import cpu_seconds, peak_rss_mb, read_requests, watch_session
from bench.loads import utilisation_spread
from bench.namespaces import create_namespace, delete_namespace
from bench.pods import CREATE_CONCURRENCY, PodTimes, catch_up, create_pod, follow, pod_manifest
from bench.quality_measures import percentile
from bench.requestcounts import BINDING, Reading, difference, event_writes, mean_ms, scheduling_total, writes
from bench.scraping import loop_lag, prometheus_queries, promsched_timings
from bench.variants import Variant, start_variant
from promsched.kube.credentials import Credentials
from promsched.kube.requests import Request
from promsched.kube.sending import KubeClient
from promsched.sandbox.builds.reporting import CountProgress
from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor

SPY = Path(sys.executable).parent / "py-spy"
MODES = ("rate", "burst")


# A run ends once every pod bound is seen Running (kwok's status update, which every scheduler's watch
# receives and the API server serves for every variant alike: a run that ended at its last binding would
# leave them out of a fast scheduler's figures and put them in a slower one's), or after RUNNING_LIMIT.
RUNNING_LIMIT = 60.0
# A watch silent this long with pods still to come is checked against a listing.
WATCH_SILENT_SECONDS = 5.0
# A scheduler may write its events behind its bindings (promsched does: bindings first). A run ends
# once the API server counted an event write per pod bound, or none for EVENTS_STILL_SECONDS, so the
# CPU they cost is in the run's.
EVENTS_POLL_SECONDS = 0.25
EVENTS_STILL_SECONDS = 1.0
EVENTS_SETTLE_LIMIT = 60.0


async def events_settled(
    read: Callable[[], Awaitable[Reading]],
    since: Reading,
    bound: int,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Reading:
    """The API server's request counters (`read`) once `bound` event writes were counted after `since`,
    or none for EVENTS_STILL_SECONDS (at most EVENTS_SETTLE_LIMIT seconds)."""
    started = event_writes(since.totals)
    deadline = clock() + EVENTS_SETTLE_LIMIT
    reading = await read()
    written, still_since = event_writes(reading.totals), clock()
    while written - started < bound and clock() < deadline:
        await sleep(EVENTS_POLL_SECONDS)
        reading = await read()
        if event_writes(reading.totals) != written:
            written, still_since = event_writes(reading.totals), clock()
        elif clock() - still_since >= EVENTS_STILL_SECONDS:
            break
    return reading


async def until_set(
    flag: asyncio.Event, seconds: float, times: PodTimes, catch_up: Callable[[], Awaitable[None]]
) -> None:
    """Wait at most `seconds` for `flag`, which the bench's watch sets; `catch_up` (a listing) whenever
    the watch was silent for WATCH_SILENT_SECONDS meanwhile, in case it stalled without failing."""
    deadline = time.monotonic() + seconds
    while not flag.is_set() and time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                flag.wait(), min(WATCH_SILENT_SECONDS, max(0.0, deadline - time.monotonic()))
            )
        if not flag.is_set() and time.monotonic() - times.last_event > WATCH_SILENT_SECONDS:
            await catch_up()


async def drive(
    credentials: Credentials,
    namespace: str,
    scheduler_name: str,
    count: int,
    rate: float | None,
    bind_timeout: float,
    at_start: Callable[[], None],
    at_end: Callable[[], None],
    shape: str = "plain",
) -> PodTimes:
    """Create `count` pods of `shape` (at `rate` per second, or all at once) and wait until all are
    bound, at most `bind_timeout` seconds after the last create, then until those are Running and the
    scheduler's events are written."""
    times = PodTimes()
    all_bound = asyncio.Event()
    all_running = asyncio.Event()  # every pod bound so far is Running
    connected = asyncio.Event()
    progress = CountProgress("pods bound", count, report_line)

    def check_done() -> None:
        progress.update(len(times.bound))
        if len(times.bound) >= count - times.failed_creates:
            all_bound.set()
        (all_running.set if len(times.running) >= len(times.bound) else all_running.clear)()

    with progress:  # a bar on a terminal; in CI a line every 10 s
        async with (
            KubeClient(credentials, timeout=60, connections=CREATE_CONCURRENCY) as client,
            watch_session(credentials) as session,
        ):
            listing = await client.send(Request("GET", f"/api/v1/namespaces/{namespace}/pods"))
            version = listing["metadata"]["resourceVersion"]
            follower = asyncio.create_task(
                follow(client, session, namespace, version, times, connected, check_done)
            )
            await asyncio.wait_for(connected.wait(), 30)
            counted = await read_requests(session)
            at_start()
            times.started = time.monotonic()
            names = [f"bench-{i:05d}" for i in range(count)]
            if rate:
                loop = asyncio.get_running_loop()
                origin = loop.time()
                tasks = []
                for index, name in enumerate(names):
                    delay = origin + index / rate - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    manifest = pod_manifest(namespace, name, scheduler_name, shape=shape)
                    tasks.append(asyncio.create_task(create_pod(client, manifest, times)))
                await asyncio.gather(*tasks)
            else:
                slots = asyncio.Semaphore(CREATE_CONCURRENCY)

                async def limited(name: str) -> None:
                    async with slots:
                        await create_pod(
                            client, pod_manifest(namespace, name, scheduler_name, shape=shape), times
                        )

                await asyncio.gather(*(limited(name) for name in names))
            check_done()

            async def caught_up() -> None:
                await catch_up(client, namespace, times, check_done)

            await until_set(all_bound, bind_timeout, times, caught_up)
            await until_set(all_running, RUNNING_LIMIT, times, caught_up)
            served = await events_settled(lambda: read_requests(session), counted, len(times.bound))
            at_end()
            times.requests = difference(counted.totals, served.totals)
            times.request_seconds = difference(counted.seconds, served.seconds)
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await follower
    return times


def _p99_ms(buckets: Buckets) -> float:
    return 1000 * histogram_quantile(0.99, buckets) if buckets else math.nan


def _load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _spy(pid: int, profile_to: Path) -> subprocess.Popen[bytes]:
    """py-spy recording the scheduler's stacks at 100 Hz into `profile_to` until the scheduler stops."""
    return subprocess.Popen(
        [
            str(SPY),
            "record",
            f"--pid={pid}",
            "--rate=100",
            "--nolineno",
            "--format=raw",
            f"--output={profile_to}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@dataclass
class Counters:
    scheduler_cpu: float = 0.0
    apiserver_cpu: float = 0.0
    prometheus_cpu: float = 0.0
    queries: float = 0.0
    at: float = 0.0
    loop_lag: Buckets = field(default_factory=list)  # promsched's, cumulative
    loop_lag_refresh: Buckets = field(default_factory=list)  # those while a metrics refresh ran


def run_once(
    sandbox: Sandbox,
    credentials: Credentials,
    variant: Variant,
    mode: str,
    pods: int,
    rate: float,
    profiles: dict[str, dict[str, float]],
    report: Report,
    profile_to: Path | None = None,
    repeat: int = 0,
    shape: str = "plain",
) -> dict[str, Any]:
    """One run of `pods` pods of `shape` in `mode` (`rate`: `rate` pods/s; `burst`: all at once); under
    py-spy into `profile_to` when given."""
    supervisor = Supervisor(sandbox.directory)
    apiserver = supervisor.get("kube-apiserver")
    prometheus = supervisor.get("prometheus")
    assert apiserver is not None
    assert prometheus is not None
    namespace = f"bench-{variant.key}-{mode}-{pods}-{repeat}"
    wall = time.monotonic()
    load = _load_average()
    asyncio.run(create_namespace(credentials, namespace))
    spy: subprocess.Popen[bytes] | None = None
    try:
        pid, metrics_url = start_variant(sandbox, variant, report)
        start_s = time.monotonic() - wall
        start, end = Counters(), Counters()

        def snapshot(into: Counters) -> None:
            into.at = time.monotonic()
            into.scheduler_cpu = cpu_seconds(pid)
            into.apiserver_cpu = cpu_seconds(apiserver.pid)
            into.prometheus_cpu = cpu_seconds(prometheus.pid)
            into.queries = prometheus_queries(sandbox.prometheus_url)
            into.loop_lag, into.loop_lag_refresh = loop_lag(metrics_url)

        def at_start() -> None:
            nonlocal spy
            snapshot(start)
            if profile_to is not None and not SPY.exists():
                report(f"  {SPY} is missing (pip install -e '.[bench]'): no profile")
            elif profile_to is not None:
                spy = _spy(pid, profile_to)

        timeout = 120 + pods * 0.4  # after the last create; only reached when a scheduler stalls
        times = asyncio.run(
            drive(
                credentials,
                namespace,
                variant.scheduler_name,
                pods,
                rate if mode == "rate" else None,
                timeout,
                at_start,
                lambda: snapshot(end),
                shape,
            )
        )
        rss = peak_rss_mb(pid)
        own = promsched_timings(metrics_url)
        measured_s = time.monotonic() - wall - start_s
    finally:
        cleanup = time.monotonic()
        supervisor.stop(variant.process)
        if spy is not None:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.send_signal(signal.SIGINT)
                spy.wait(30)
        asyncio.run(delete_namespace(credentials, namespace))
        cleanup_s = time.monotonic() - cleanup
    latencies = times.latencies()
    bound = len(times.bound)
    last_bind = max(times.bound.values(), default=times.started)
    span = last_bind - times.started
    # Reading Prometheus's /metrics is not a query: the delta is the scheduler's queries alone.
    queries = max(0.0, end.queries - start.queries)
    result: dict[str, Any] = {
        "variant": variant.key,
        "label": variant.label,
        "mode": mode,
        "pods": pods,
        "bound": bound,
        "running": len(times.running),
        "failed_creates": times.failed_creates,
        "watch_restarts": times.watch_restarts,
        "late_binds": times.late_binds,
        "throughput": bound / span if span > 0 else math.nan,
        "span_s": span,
        # When the last pod was seen Running, from the first create: kwok's pace, the same for any variant.
        "running_s": max(times.running.values(), default=times.started) - times.started,
        "p50_ms": 1000 * percentile(latencies, 0.50),
        "p90_ms": 1000 * percentile(latencies, 0.90),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "max_ms": 1000 * latencies[-1] if latencies else math.nan,
        # promsched's event loop lag over the run, and while its metrics refreshes ran (issue 43's target),
        # as Prometheus would read its histogram.
        "loop_lag_p99_ms": _p99_ms(added(start.loop_lag, end.loop_lag)),
        "loop_lag_refresh_p99_ms": _p99_ms(refreshing := added(start.loop_lag_refresh, end.loop_lag_refresh)),
        "loop_lag_refresh_observations": refreshing[-1][1] if refreshing else 0.0,
        "prometheus_queries": queries,
        "queries_per_pod": queries / bound if bound else math.nan,
        "scheduler_cpu_s": end.scheduler_cpu - start.scheduler_cpu,
        "scheduler_cpu_ms_per_pod": 1000 * (end.scheduler_cpu - start.scheduler_cpu) / bound
        if bound
        else math.nan,
        "peak_rss_mb": rss,
        "apiserver_cpu_s": end.apiserver_cpu - start.apiserver_cpu,
        # Bindings, pods/status and events (kwok's pod status updates too, the same for every variant).
        "scheduling_writes_per_pod": scheduling_total(times.requests) / bound if bound else math.nan,
        "writes_per_pod": {key.label: n / bound for key, n in sorted(writes(times.requests).items())}
        if bound
        else {},
        # Prometheus shares the machine: promsched's queries (and its own scrapes, alike for every variant)
        # take CPU from the API server the bindings wait on.
        "prometheus_ms_per_pod": 1000 * (end.prometheus_cpu - start.prometheus_cpu) / bound
        if bound
        else math.nan,
        "apiserver_ms_per_bind": 1000 * (end.apiserver_cpu - start.apiserver_cpu) / bound
        if bound
        else math.nan,
        # The API server's own time per binding: with the scheduler's (bind_ms_mean) it tells a slow
        # server from a slow client.
        "apiserver_bind_latency_ms": mean_ms(times.request_seconds, times.requests, BINDING),
        "spread": utilisation_spread(profiles, times.node),
        "pods_per_node_histogram": dict(sorted(Counter(Counter(times.node.values()).values()).items())),
        **own,
        "latencies_s": [round(v, 5) for v in latencies],
        "wall_s": time.monotonic() - wall,
        "start_s": start_s,
        "measured_s": measured_s,
        "cleanup_s": cleanup_s,
        "load_average_1m": load,
        "profiled": profile_to is not None,
        "repeat": repeat,
    }
    report(
        f"  {variant.label:32} {mode:5} {pods:5} pods: {bound} bound, {result['throughput']:.1f} pods/s, "
        f"p99 {result['p99_ms']:.0f} ms, CPU {result['scheduler_cpu_s']:.2f} s "
        f"({result['scheduler_cpu_ms_per_pod']:.2f} ms/pod), API server "
        f"{result['apiserver_ms_per_bind']:.2f} ms/bind "
        f"(serving one {result['apiserver_bind_latency_ms']:.1f} ms), "
        f"RSS {rss:.0f} MB, "
        f"cpu spread {result['spread']['cpu_std']:.2f} (start {start_s:.0f} s, run {measured_s:.1f} s: "
        f"bound by {span:.1f}, Running by {result['running_s']:.1f}; "
        f"cleanup {cleanup_s:.0f} s; load {load:.1f})"
        + (f"; decide {own['decide_ms_mean']:.1f} ms/pod" if "decide_ms_mean" in own else "")
    )
    return result
