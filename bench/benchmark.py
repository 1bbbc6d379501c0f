"""`make bench`: promsched side by side with kube-scheduler and a null binder, on one sandbox per node count.

    python -m bench.benchmark [--nodes 100,1000] [--pods 500] [--rate 50] [--out bench/results]
                              [--modes rate,burst] [--variants promsched,ks-default,ks-raised,null]
                              [--repeats 3] [--big-burst 5000,10000] [--profile] [--micro] [--merge]
                              [--render]

For each node count it starts a sandbox (kwok nodes with skewed load profiles, simulated metrics for all)
and runs, one after another and each in a namespace of its own that is deleted before the next run, each
row `--repeats` times interleaved (every variant and mode once, then again; reported as medians and ranges):

- promsched: `promsched run` with one SchedulingPolicy of the five built-in plugins;
- kube-scheduler of the sandbox's Kubernetes release, at its default client QPS/burst (50/100) and raised
  (1000/2000);
- the null binder (`bench/nullbinder.py`): promsched's client stack binding round-robin, no filtering or
  scoring: the API server's limit on this machine.

Each of them gets the same pods at a fixed arrival rate and as a burst. It measures throughput, latency
from creation to binding, Prometheus queries per pod, the scheduler's CPU and peak RSS, the API server's
CPU per binding, and the spread of node utilisation (the load profile plus the placed pods' requests).
Results go to OUT/results.json, OUT/results.md and OUT/*.png (with matplotlib).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import random
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
import yaml

from bench import reporting
from bench.kubeapi import cpu_seconds, peak_rss_mb, read_counts, watch, watch_session
from bench.requestcounts import Counts, difference, scheduling_total, writes
from promsched.api.crds import render_crd_yaml
from promsched.kube.configuring import from_kubeconfig
from promsched.kube.credentials import Credentials
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError, KubeClient
from promsched.sandbox import launching
from promsched.sandbox.clusters import Sandbox, SandboxError
from promsched.sandbox.components import SANDBOX_RELEASE
from promsched.sandbox.demoing import start_scheduler
from promsched.sandbox.profiles import LoadProfile, NodeSetup
from promsched.sandbox.supervising import Supervisor, free_port, wait_until
from promsched.scheduling.resources import parse_quantity

REPO = Path(__file__).resolve().parents[1]
SPY = Path(sys.executable).parent / "py-spy"
Report = Callable[[str], None]

POD_CPU = "100m"
POD_MEMORY = "128Mi"
POD_IMAGE = "registry.k8s.io/pause:3.10"
POLICY_NAME = "bench"
CREATE_CONCURRENCY = 64
MODES = ("rate", "burst")


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    kind: str  # promsched | kube-scheduler | null
    qps: int = 0
    burst: int = 0

    @property
    def scheduler_name(self) -> str:
        return f"bench-{self.key}"

    @property
    def process(self) -> str:
        return f"bench-{self.key}"


VARIANTS = (
    # promsched's client budget as kube-scheduler's raised one: the benchmark measures the schedulers'
    # own speed (quiet.py, about writes, runs it at the default 50/100).
    Variant("promsched", "promsched (QPS 1000/2000)", "promsched", 1000, 2000),
    Variant("ks-default", "kube-scheduler (QPS 50/100)", "kube-scheduler", 50, 100),
    Variant("ks-raised", "kube-scheduler (QPS 1000/2000)", "kube-scheduler", 1000, 2000),
    Variant("null", "null binder", "null"),
)


@dataclass(frozen=True)
class Settings:
    node_counts: tuple[int, ...]
    pods: int
    rate: float
    modes: tuple[str, ...]
    variants: tuple[Variant, ...]
    out: Path
    refresh: str
    history: float
    big_bursts: tuple[int, ...]
    profile: bool
    seed: int
    workdir: Path | None
    merge: bool
    render: bool
    micro: bool
    repeats: int = 3


# ----- load profiles and decision quality ---------------------------------------------------------------


def skewed_profiles(names: list[str], seed: int) -> dict[str, dict[str, float]]:
    """Right-skewed loads: most nodes lightly or moderately loaded, a long tail of hot ones."""
    rng = random.Random(seed)
    profiles = {}
    for name in names:
        profiles[name] = {
            "cpu": round(5 + 90 * rng.betavariate(1.3, 2.6), 1),
            "memory": round(10 + 80 * rng.betavariate(1.5, 2.5), 1),
            "diskBusy": round(2 + 60 * rng.betavariate(1.2, 4.0), 1),
            "diskUsed": round(20 + 70 * rng.random(), 1),
            "network": float(round(1e5 * 10 ** (2.6 * rng.random()))),
        }
    return profiles


def allocatable() -> tuple[int, int]:
    """The sandbox nodes' allocatable CPU (millicores) and memory (bytes), as `up` creates them."""
    manifest: Any = launching.node_manifest("node-0", 0, NodeSetup(LoadProfile()))
    allocatable = manifest["status"]["allocatable"]
    return (
        parse_quantity(allocatable["cpu"], "cpu", milli=True),
        parse_quantity(allocatable["memory"], "memory"),
    )


def utilisation_spread(profiles: dict[str, dict[str, float]], placements: dict[str, str]) -> dict[str, float]:
    """Standard deviation and maximum over nodes of CPU and memory utilisation (percent): each node's
    profile plus the requests of the pods placed on it."""
    milli_cpu, memory = allocatable()
    pod_cpu = parse_quantity(POD_CPU, "cpu", milli=True)
    pod_memory = parse_quantity(POD_MEMORY, "memory")
    count = dict.fromkeys(profiles, 0)
    for node in placements.values():
        count[node] = count.get(node, 0) + 1
    cpu = [profiles[n]["cpu"] + 100.0 * count[n] * pod_cpu / milli_cpu for n in profiles]
    mem = [profiles[n]["memory"] + 100.0 * count[n] * pod_memory / memory for n in profiles]
    return {
        "cpu_std": statistics.pstdev(cpu),
        "cpu_max": max(cpu),
        "memory_std": statistics.pstdev(mem),
        "memory_max": max(mem),
        "max_pods_per_node": float(max(count.values(), default=0)),
    }


# ----- measuring one run --------------------------------------------------------------------------------


@dataclass
class PodTimes:
    created: dict[str, float] = field(default_factory=dict)
    first_seen: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    node: dict[str, str] = field(default_factory=dict)
    failed_creates: int = 0
    started: float = 0.0
    last_event: float = 0.0
    watch_restarts: list[str] = field(default_factory=list)
    late_binds: int = 0  # bindings found by a listing after the watch missed them: timed late
    requests: Counts = field(default_factory=dict)  # the API server's requests over the run, by kind

    def latencies(self) -> list[float]:
        """Seconds from creation to binding: creation is when the POST returned or the watch first saw the
        pod, whichever came first; binding is when the watch first saw spec.nodeName."""
        values = []
        for name, bound in self.bound.items():
            created = min(self.created.get(name, math.inf), self.first_seen.get(name, math.inf))
            if math.isfinite(created):
                values.append(max(0.0, bound - created))
        return sorted(values)


def pod_manifest(namespace: str, name: str, scheduler_name: str, cpu: str = POD_CPU) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "promsched-bench"}},
        "spec": {
            "schedulerName": scheduler_name,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "pause",
                    "image": POD_IMAGE,
                    "resources": {"requests": {"cpu": cpu, "memory": POD_MEMORY}},
                }
            ],
        },
    }


def _observe(pod: dict[str, Any], times: PodTimes, done: Callable[[], None]) -> bool:
    """Record when the pod was first seen and first seen bound; True when this found its binding."""
    now = time.monotonic()
    times.last_event = now
    name = pod["metadata"]["name"]
    times.first_seen.setdefault(name, now)
    node = pod["spec"].get("nodeName")
    if node and name not in times.bound:
        times.bound[name] = now
        times.node[name] = node
        done()
        return True
    return False


async def catch_up(client: KubeClient, namespace: str, times: PodTimes, done: Callable[[], None]) -> str:
    """List the namespace's pods and record what the watch missed: bindings found so are timed now, later
    than they happened. Returns the listing's resourceVersion."""
    listing = await client.send(Request("GET", f"/api/v1/namespaces/{namespace}/pods"))
    for pod in listing["items"]:
        if _observe(pod, times, done):
            times.late_binds += 1
    version: str = listing["metadata"]["resourceVersion"]
    return version


async def follow(
    client: KubeClient,
    session: Any,
    namespace: str,
    version: str,
    times: PodTimes,
    connected: asyncio.Event,
    done: Callable[[], None],
) -> None:
    """Watch the namespace's pods; when the watch fails or ends, catch up from a listing and watch again."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    while True:
        try:
            async for kind, pod in watch(session, path, {"resourceVersion": version}, connected):
                version = pod["metadata"].get("resourceVersion", version)
                if kind != "DELETED":
                    _observe(pod, times, done)
            reason = "the watch ended"
        except (RuntimeError, aiohttp.ClientError, TimeoutError, ValueError) as error:
            reason = f"{type(error).__name__}: {error}"[:300]
        times.watch_restarts.append(reason)
        await asyncio.sleep(0.2)
        version = await catch_up(client, namespace, times, done)


async def create_pod(client: KubeClient, manifest: dict[str, Any], times: PodTimes) -> None:
    """Create the pod, retrying what the API server may refuse under load; records when it was created."""
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    request = Request("POST", f"/api/v1/namespaces/{namespace}/pods", manifest)
    for attempt in range(6):
        try:
            await client.send(request)
        except ApiError as error:
            if error.status == 409:  # a retried POST that had gone through
                break
            if error.status not in (429, 500, 503, 504) or attempt == 5:
                times.failed_creates += 1
                return
        except (OSError, TimeoutError):
            if attempt == 5:
                times.failed_creates += 1
                return
        else:
            break
        await asyncio.sleep(0.2 * 2**attempt)
    times.created[name] = time.monotonic()


async def drive(
    credentials: Credentials,
    namespace: str,
    scheduler_name: str,
    count: int,
    rate: float | None,
    bind_timeout: float,
    at_start: Callable[[], None],
    at_end: Callable[[], None],
) -> PodTimes:
    """Create `count` pods (at `rate` per second, or all at once) and wait until all are bound, at most
    `bind_timeout` seconds after the last create."""
    times = PodTimes()
    all_bound = asyncio.Event()
    connected = asyncio.Event()

    def check_done() -> None:
        if len(times.bound) >= count - times.failed_creates:
            all_bound.set()

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
        counted = await read_counts(session)
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
                manifest = pod_manifest(namespace, name, scheduler_name)
                tasks.append(asyncio.create_task(create_pod(client, manifest, times)))
            await asyncio.gather(*tasks)
        else:
            slots = asyncio.Semaphore(CREATE_CONCURRENCY)

            async def limited(name: str) -> None:
                async with slots:
                    await create_pod(client, pod_manifest(namespace, name, scheduler_name), times)

            await asyncio.gather(*(limited(name) for name in names))
        check_done()
        deadline = time.monotonic() + bind_timeout
        while not all_bound.is_set() and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_bound.wait(), min(5.0, max(0.0, deadline - time.monotonic())))
            if not all_bound.is_set() and time.monotonic() - times.last_event > 5.0:
                # Nothing from the watch for 5 s with pods unbound: check it has not silently stalled.
                await catch_up(client, namespace, times, check_done)
        at_end()
        times.requests = difference(counted, await read_counts(session))
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await follower
    return times


# ----- namespaces ---------------------------------------------------------------------------------------


async def create_namespace(credentials: Credentials, namespace: str) -> None:
    async with KubeClient(credentials) as client:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        await client.send(Request("POST", "/api/v1/namespaces", body))
        # The ServiceAccount admission plugin rejects pods until the namespace's default account exists.
        deadline = time.monotonic() + 60
        while True:
            try:
                await client.send(Request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default"))
                return
            except ApiError as error:
                if error.status != 404 or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)


async def delete_namespace(credentials: Credentials, namespace: str) -> None:
    """Delete the namespace's pods at once (no grace), then the namespace; return once it is gone.
    Deleting 10,000 pods in one request outlasts the API server's request timeout, which drops the
    connection: the namespace's deletion then removes the rest."""
    async with KubeClient(credentials, timeout=300) as client:
        with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
            await client.send(
                Request("DELETE", f"/api/v1/namespaces/{namespace}/pods", params={"gracePeriodSeconds": "0"})
            )
        with contextlib.suppress(ApiError):
            await client.send(Request("DELETE", f"/api/v1/namespaces/{namespace}"))
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                await client.send(Request("GET", f"/api/v1/namespaces/{namespace}"))
            except ApiError as error:
                if error.status == 404:
                    return
                raise
            except (aiohttp.ClientError, TimeoutError):
                pass  # the API server is busy deleting: ask again
            await asyncio.sleep(0.5)
        raise SandboxError(f"namespace {namespace} was not deleted within 600 s")


# ----- the schedulers -----------------------------------------------------------------------------------


def prometheus_queries(url: str, handlers: tuple[str, ...] = ("/api/v1/query",)) -> float:
    """Prometheus's own count of the queries it answered on `handlers` (default: instant queries, GET and
    POST /api/v1/query)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    wanted = tuple(f'handler="{handler}"' for handler in handlers)
    total = 0.0
    for line in text.splitlines():
        if line.startswith("prometheus_http_requests_total{") and any(h in line for h in wanted):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _wait_quiet(pid: int, limit: float = 30.0, busy: float = 0.3) -> None:
    """Wait until a freshly started scheduler has digested its initial listings: CPU use below `busy`
    (share of one core) over two consecutive half-second windows, or `limit` seconds."""
    deadline = time.monotonic() + limit
    quiet = 0
    while time.monotonic() < deadline and quiet < 2:
        before = cpu_seconds(pid)
        time.sleep(0.5)
        quiet = quiet + 1 if cpu_seconds(pid) - before < busy * 0.5 else 0


def _load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _scheduler_env() -> dict[str, str]:
    paths = [str(REPO), *(p or os.getcwd() for p in sys.path)]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)))


def start_variant(sandbox: Sandbox, variant: Variant, report: Report) -> tuple[int, str | None]:
    """Start the variant's scheduler as a sandbox process; returns its pid once it is ready and settled,
    and for promsched the base URL of its /metrics."""
    supervisor = Supervisor(sandbox.directory)
    url = None
    if variant.kind == "promsched":
        budget = ("--kube-api-qps", str(variant.qps), "--kube-api-burst", str(variant.burst))
        url = start_scheduler(
            sandbox, lambda _line: None, name=variant.process, extra=budget if variant.qps else ()
        )
    elif variant.kind == "kube-scheduler":
        kubeconfig = str(sandbox.kubeconfig)
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": kubeconfig, "qps": variant.qps, "burst": variant.burst},
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": variant.scheduler_name}],
        }
        config_file = sandbox.directory / f"{variant.process}.yaml"
        config_file.write_text(yaml.safe_dump(config))
        port = free_port()
        process = supervisor.spawn(
            variant.process,
            [
                sandbox.binary("kube-scheduler"),
                f"--config={config_file}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
            ],
        )
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE

        def ready() -> bool:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", timeout=5, context=context) as r:
                return bool(r.status == 200)

        wait_until(f"{variant.process} /readyz", ready, 120, process, supervisor)
    else:
        ready_file = sandbox.directory / f"{variant.process}.ready"
        ready_file.unlink(missing_ok=True)
        process = supervisor.spawn(
            variant.process,
            [
                sys.executable,
                "-m",
                "bench.nullbinder",
                f"--kubeconfig={sandbox.kubeconfig}",
                f"--scheduler-name={variant.scheduler_name}",
                "--concurrency=32",
                f"--ready={ready_file}",
            ],
            env=_scheduler_env(),
        )
        wait_until(f"{variant.process} ready", ready_file.exists, 60, process, supervisor)
    process_record = supervisor.get(variant.process)
    if process_record is None:
        raise SandboxError(f"{variant.process} has no pid file")
    _wait_quiet(process_record.pid)
    return process_record.pid, url


def _own_metrics(url: str | None) -> dict[str, float]:
    """promsched's mean decision time (filter and score one pod) and binding time, from its /metrics."""
    if url is None:
        return {}
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    sums: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        for metric in ("promsched_scheduling_attempt_duration_seconds", "promsched_binding_duration_seconds"):
            for suffix in ("_sum", "_count"):
                if name.startswith(metric + suffix) and ('result="bound"' in name or "binding" not in metric):
                    sums[metric + suffix] = sums.get(metric + suffix, 0.0) + float(value)
    found = {}
    for metric, key in (
        ("promsched_scheduling_attempt_duration_seconds", "decide_ms_mean"),
        ("promsched_binding_duration_seconds", "bind_ms_mean"),
    ):
        count = sums.get(metric + "_count", 0.0)
        if count:
            found[key] = 1000 * sums.get(metric + "_sum", 0.0) / count
    return found


def apply_policy(sandbox: Sandbox, refresh: str) -> None:
    sandbox.kubectl("apply", "--server-side", "-f", "-", input=render_crd_yaml())
    sandbox.kubectl(
        "wait", "--for=condition=Established", "crd/schedulingpolicies.promsched.io", "--timeout=60s"
    )
    policy = {
        "apiVersion": "promsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": policy_spec(sandbox.prometheus_url, refresh),
    }
    sandbox.kubectl("apply", "-f", "-", input=json.dumps(policy))


def policy_spec(prometheus_url: str, refresh: str) -> dict[str, Any]:
    """The benchmark's policy: the five built-in plugins, CPU and memory weighing most."""
    return {
        "schedulerName": VARIANTS[0].scheduler_name,
        "prometheus": {"url": prometheus_url, "timeout": "5s"},
        "refreshInterval": refresh,
        "staleAfter": "2m",
        "plugins": [
            {"name": "cpu", "weight": 4, "timeRange": "1m"},
            {"name": "memory", "weight": 3, "timeRange": "0s"},
            {"name": "diskIO", "weight": 2, "timeRange": "1m"},
            {"name": "diskSpace", "weight": 1, "timeRange": "0s"},
            {"name": "network", "weight": 1, "timeRange": "1m"},
        ],
    }


# ----- one run and one node count -----------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    position = (len(values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


@dataclass
class Counters:
    scheduler_cpu: float = 0.0
    apiserver_cpu: float = 0.0
    queries: float = 0.0
    at: float = 0.0


def run_once(
    sandbox: Sandbox,
    credentials: Credentials,
    variant: Variant,
    mode: str,
    pods: int,
    settings: Settings,
    profiles: dict[str, dict[str, float]],
    report: Report,
    profile_to: Path | None = None,
    repeat: int = 0,
) -> dict[str, Any]:
    supervisor = Supervisor(sandbox.directory)
    apiserver = supervisor.get("kube-apiserver")
    assert apiserver is not None
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
            into.queries = prometheus_queries(sandbox.prometheus_url)

        def at_start() -> None:
            nonlocal spy
            snapshot(start)
            if profile_to is not None and not SPY.exists():
                report(f"  {SPY} is missing (pip install -e '.[bench]'): no profile")
            elif profile_to is not None:
                spy = subprocess.Popen(
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

        timeout = 120 + pods * 0.4  # after the last create; only reached when a scheduler stalls
        times = asyncio.run(
            drive(
                credentials,
                namespace,
                variant.scheduler_name,
                pods,
                settings.rate if mode == "rate" else None,
                timeout,
                at_start,
                lambda: snapshot(end),
            )
        )
        rss = peak_rss_mb(pid)
        own = _own_metrics(metrics_url)
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
        "failed_creates": times.failed_creates,
        "watch_restarts": times.watch_restarts,
        "late_binds": times.late_binds,
        "throughput": bound / span if span > 0 else math.nan,
        "span_s": span,
        "p50_ms": 1000 * percentile(latencies, 0.50),
        "p90_ms": 1000 * percentile(latencies, 0.90),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "max_ms": 1000 * latencies[-1] if latencies else math.nan,
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
        "apiserver_ms_per_bind": 1000 * (end.apiserver_cpu - start.apiserver_cpu) / bound
        if bound
        else math.nan,
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
        f"{result['apiserver_ms_per_bind']:.2f} ms/bind, RSS {rss:.0f} MB, "
        f"cpu spread {result['spread']['cpu_std']:.2f} (start {start_s:.0f} s, run {measured_s:.0f} s, "
        f"cleanup {cleanup_s:.0f} s; load {load:.1f})"
        + (f"; decide {own['decide_ms_mean']:.1f} ms/pod" if "decide_ms_mean" in own else "")
    )
    return result


def stop_sandbox(directory: Path, logs: Path) -> None:
    """Stop the sandbox in `directory` and remove it, keeping the schedulers' logs (bench-*.log) in `logs`."""
    launching.down(directory, lambda _line: None)
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    for log in (directory / "logs").glob("bench-*.log"):
        shutil.copy(log, logs / log.name)
    shutil.rmtree(directory, ignore_errors=True)


def bench_nodes(nodes: int, settings: Settings, report: Report) -> dict[str, Any]:
    started = time.monotonic()
    base = settings.workdir or Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix=f"promsched-bench-{nodes}-", dir=base))
    names = [f"node-{i}" for i in range(nodes)]
    profiles = skewed_profiles(names, settings.seed + nodes)
    profiles_file = directory / "bench-profiles.yaml"
    profiles_file.write_text(yaml.safe_dump({"nodes": profiles}, sort_keys=False))
    runs: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    profile_file: Path | None = None
    try:
        report(f"== {nodes} nodes: starting a sandbox in {directory}")
        sandbox = launching.up(
            directory, nodes=nodes, profiles_file=profiles_file, history=settings.history, report=report
        )
        up_seconds = time.monotonic() - started
        credentials = from_kubeconfig(sandbox.kubeconfig)
        apply_policy(sandbox, settings.refresh)
        # Interleaved (every variant and mode once, then again): a slow spell of the shared machine falls
        # on one repeat of several rows, not on every repeat of one; the report takes medians.
        for repeat in range(settings.repeats):
            for variant in settings.variants:
                for mode in settings.modes:
                    report(f"  repeat {repeat + 1}/{settings.repeats}")
                    runs.append(
                        run_once(
                            sandbox,
                            credentials,
                            variant,
                            mode,
                            settings.pods,
                            settings,
                            profiles,
                            report,
                            repeat=repeat,
                        )
                    )
        if nodes <= 1000 and nodes == max(n for n in settings.node_counts if n <= 1000):
            counts = settings.big_bursts or ((settings.pods,) if settings.profile else ())
            for index, count in enumerate(counts):
                # py-spy on the first big burst only: the others measure peak RSS undisturbed.
                profiled = settings.profile and index == 0
                if profiled:
                    profile_file = settings.out / f"profile-promsched-{nodes}.txt"
                try:
                    extra.append(
                        run_once(
                            sandbox,
                            credentials,
                            VARIANTS[0],
                            "burst",
                            count,
                            settings,
                            profiles,
                            report,
                            profile_file if profiled else None,
                        )
                    )
                except (SandboxError, ApiError, aiohttp.ClientError, TimeoutError) as error:
                    # An extra run that fails must not take the repeated runs' results with it.
                    report(f"  the extra burst of {count} pods failed: {type(error).__name__}: {error}")
    finally:
        report(f"== {nodes} nodes: stopping the sandbox")
        stop_sandbox(directory, settings.out / f"logs-{nodes}")
    baseline = utilisation_spread(profiles, {})
    return {
        "nodes": nodes,
        "runs": runs,
        "extra_runs": extra,
        "baseline_spread": baseline,
        "sandbox_up_s": up_seconds,
        "wall_s": time.monotonic() - started,
        "profile_file": str(profile_file) if profile_file else None,
    }


# ----- entry point --------------------------------------------------------------------------------------


def _parse_args(argv: list[str] | None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument(
        "--nodes",
        default=os.environ.get("BENCH_NODES", "100,1000"),
        help="comma-separated node counts (default $BENCH_NODES or 100,1000)",
    )
    parser.add_argument("--pods", type=int, default=500, help="pods per run (default 500)")
    parser.add_argument("--rate", type=float, default=50.0, help="arrival rate of the rate runs, pods/s")
    parser.add_argument("--modes", default=",".join(MODES), help="rate,burst")
    parser.add_argument(
        "--variants", default=",".join(v.key for v in VARIANTS), help="promsched,ks-default,ks-raised,null"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--refresh", default="15s", help="the policy's refreshInterval (default 15s)")
    parser.add_argument("--history", type=float, default=300.0, help="seconds of backfilled metrics")
    parser.add_argument(
        "--big-burst",
        default="",
        help="also promsched-only bursts of these many pods (comma-separated, e.g. 5000,10000) at the "
        "largest node count <= 1000 (peak RSS)",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy on the first extra promsched burst")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs of each variant and mode, interleaved; the report gives medians and ranges (default 3)",
    )
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--workdir", type=Path, help="where the sandboxes go (default: the temp dir)")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the results of other node counts already in OUT/results.json (e.g. to add 5000 nodes)",
    )
    parser.add_argument(
        "--render", action="store_true", help="only rewrite results.md and the plots from OUT/results.json"
    )
    parser.add_argument(
        "--micro",
        action="store_true",
        help="also time the decision alone offline (bench/decide_micro.py) at each node count",
    )
    args = parser.parse_args(argv)
    known = {v.key: v for v in VARIANTS}
    variants = tuple(known[key] for key in args.variants.split(",") if key)
    modes = tuple(mode for mode in args.modes.split(",") if mode)
    if set(modes) - set(MODES):
        parser.error(f"--modes: use {', '.join(MODES)}")
    if args.repeats < 1:
        parser.error("--repeats: at least 1")
    return Settings(
        node_counts=tuple(int(n) for n in args.nodes.split(",") if n),
        pods=args.pods,
        rate=args.rate,
        modes=modes,
        variants=variants,
        out=args.out.resolve(),
        refresh=args.refresh,
        history=args.history,
        big_bursts=tuple(int(n) for n in args.big_burst.split(",") if n),
        profile=args.profile,
        seed=args.seed,
        workdir=args.workdir,
        merge=args.merge,
        render=args.render,
        micro=args.micro,
        repeats=args.repeats,
    )


def report_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def terminate(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def revision() -> dict[str, Any]:
    """The commit measured, and the files of the package that differed from it when the run started."""

    def git(*args: str) -> str:
        result = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return result.stdout.rstrip()

    changed = git("status", "--porcelain", "--", "operator")
    return {
        "commit": git("rev-parse", "HEAD").strip(),
        "changed": [line[3:] for line in changed.splitlines()],
    }


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpus": os.cpu_count(), "cpu_model": model, "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    settings = _parse_args(argv)
    signal.signal(signal.SIGTERM, terminate)
    settings.out.mkdir(parents=True, exist_ok=True)
    previous = settings.out / "results.json"
    if settings.render:
        stored: dict[str, Any] = json.loads(previous.read_text())
        if settings.micro:
            stored["micro"] = _micro(sorted({e["nodes"] for e in stored["node_counts"]}))
        print(_write(stored, settings.out, plots=True))
        return 0
    started = time.monotonic()
    invocation = {
        "argv": sys.argv[1:] if argv is None else argv,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "node_counts": list(settings.node_counts),
        "wall_s": 0.0,
    }
    results: dict[str, Any] = {
        "settings": {
            **{
                k: v
                for k, v in asdict(settings).items()
                if k not in ("out", "variants", "workdir", "merge", "render", "micro")
            },
            "variants": [asdict(v) for v in settings.variants],
            "pod_requests": {"cpu": POD_CPU, "memory": POD_MEMORY},
        },
        "kubernetes": SANDBOX_RELEASE,
        "machine": machine(),
        "revision": revision(),
        "started": invocation["started"],
        "invocations": [invocation],
        "node_counts": [],
    }
    if settings.merge and previous.exists():
        # Keep the earlier results of the node counts this invocation does not run.
        earlier = json.loads(previous.read_text())
        results = {**earlier, "invocations": [*earlier.get("invocations", []), invocation]}
        results["node_counts"] = [e for e in earlier["node_counts"] if e["nodes"] not in settings.node_counts]
    for nodes in settings.node_counts:
        entry = bench_nodes(nodes, settings, report_line)
        entry["settings"] = {
            "pods": settings.pods,
            "rate": settings.rate,
            "modes": list(settings.modes),
            "variants": [v.key for v in settings.variants],
            "refresh": settings.refresh,
            "big_bursts": list(settings.big_bursts),
            "repeats": settings.repeats,
            "revision": revision(),
        }
        results["node_counts"].append(entry)
        results["node_counts"].sort(key=lambda e: e["nodes"])
        invocation["wall_s"] = time.monotonic() - started
        _write(results, settings.out, plots=False)
    if settings.micro:
        results["micro"] = _micro(sorted({e["nodes"] for e in results["node_counts"]}))
    invocation["wall_s"] = time.monotonic() - started
    markdown = _write(results, settings.out, plots=True)
    print(markdown)
    return 0


def _micro(node_counts: list[int]) -> list[dict[str, object]]:
    """`bench.decide_micro` at each node count: the decision alone, offline, and the fix prototypes."""
    from bench import decide_micro

    rows = []
    for nodes in node_counts:
        pods = 300 if nodes <= 1000 else 100
        report_line(f"== the decision alone, offline: {nodes} nodes, {pods} pods")
        rows += decide_micro.measure(nodes, pods)
    return rows


def _write(results: dict[str, Any], out: Path, plots: bool) -> str:
    results["targets"] = reporting.targets(results)
    document = reporting.sanitize(results)
    (out / "results.json").write_text(json.dumps(document, indent=1, default=_json_default, allow_nan=False))
    earlier = out / "before" / "results.json"
    before = json.loads(earlier.read_text()) if earlier.exists() else None
    markdown = reporting.markdown(results, before)
    (out / "results.md").write_text(markdown)
    if plots:
        for line in reporting.plots(results, out):
            report_line(line)
    return markdown


def _json_default(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not serialisable: {value!r}")


if __name__ == "__main__":
    sys.exit(main())
