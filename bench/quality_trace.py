"""The quality benchmark's workload: a seeded, reproducible trace of services and batch jobs.

Pure: the same settings and seed give the same trace, event for event. A trace is a list of workloads
(a service runs to the end and grows by scale-ups; a batch job is a few pods that run for a while and are
deleted; bench.quality creates both as ReplicaSets) and the timed events that replay it. Every workload
carries its pods' real usage, which the sandbox reads from the pod annotation USAGE_ANNOTATION: usage
differs from requests as it does in production (see bench/README.md, "make bench-quality", for the
distribution and its sources, and what is assumed).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Literal

USAGE_ANNOTATION = "sandbox.promsched.io/usage"
MIB = 1024**2

# CPU usage / CPU request per workload: (share of workloads, low, high), drawn uniformly in each band.
# Most pods use a fraction of what they request; a minority runs well above it (no CPU limit set).
CPU_RATIO_BANDS = ((0.65, 0.10, 0.40), (0.20, 0.40, 1.00), (0.15, 1.50, 3.00))
# Memory is steadier: working set / request, uniformly.
MEMORY_RATIO = (0.55, 0.90)
# Request sizes (CPU millicores, weight); memory requests are 1-2 GiB per requested core.
CPU_REQUESTS = ((100, 2), (250, 3), (500, 4), (1000, 3), (2000, 1))
# Pods that run far above their request are the small ones: a pod requesting 2 cores at 3x would
# exceed a whole sandbox node.
HOT_REQUEST_LIMIT_MILLI = 500
MEMORY_PER_CORE_MIB = (1024, 2048)

Kind = Literal["service", "batch"]
Action = Literal["create", "scale", "delete"]


@dataclass(frozen=True)
class Usage:
    """What each pod of a workload really uses while it runs."""

    cpu_milli: int
    memory_bytes: int
    disk_busy: float  # percent of the node's disk time
    network: float  # bytes per second, receive plus transmit

    def annotation(self) -> str:
        """The value of USAGE_ANNOTATION: the sandbox's grammar, comma-separated key=value."""
        return (
            f"cpu={self.cpu_milli}m,memory={self.memory_bytes},"
            f"diskBusy={self.disk_busy:g},network={self.network:.0f}"
        )


@dataclass(frozen=True)
class Workload:
    name: str
    kind: Kind
    cpu_request_milli: int
    memory_request_bytes: int
    usage: Usage
    arrive_s: float
    end_s: float | None  # None: it runs to the end of the trace
    # (seconds, replicas) from its arrival on: a service's scale-ups; a job's one size.
    sizes: tuple[tuple[float, int], ...]

    @property
    def cpu_ratio(self) -> float:
        return self.usage.cpu_milli / self.cpu_request_milli

    def replicas_at(self, at_s: float) -> int:
        if at_s < self.arrive_s or (self.end_s is not None and at_s >= self.end_s):
            return 0
        current = 0
        for since, replicas in self.sizes:
            if since <= at_s:
                current = replicas
        return current


@dataclass(frozen=True, order=True)
class Event:
    at_s: float
    order: int  # creates and scale-ups after deletes at the same second; then by name
    workload: str
    action: Action
    replicas: int = 0


@dataclass(frozen=True)
class TraceSettings:
    nodes: int = 100
    minutes: float = 10.0
    seed: int = 15
    node_cpu_milli: int = 3900  # the sandbox nodes' allocatable (bench.loads.allocatable)
    node_memory_bytes: int = 15 * 1024**3
    requested_at_end: float = 0.70  # share of the cluster's allocatable CPU requested when the trace ends
    services_ramp: float = 0.35  # services arrive over this share of the trace
    scale_until: float = 0.85  # services scale up until this share of the trace
    batch_jobs_per_minute_per_100_nodes: float = 6.0
    batch_minutes: tuple[float, float] = (1.0, 4.0)  # a job's duration, log-uniform between these

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes: {self.nodes}; give at least 1")
        if self.minutes <= 0:
            raise ValueError(f"minutes: {self.minutes}; give a positive length of trace")
        if not 0.0 < self.requested_at_end < 1.0:
            raise ValueError(f"requested_at_end: {self.requested_at_end}; give a share between 0 and 1")
        if not self.services_ramp <= self.scale_until <= 1.0:
            raise ValueError(
                f"scale_until: {self.scale_until}; give a share of the trace between services_ramp "
                f"({self.services_ramp}) and 1"
            )


@dataclass(frozen=True)
class Trace:
    settings: TraceSettings
    workloads: tuple[Workload, ...]
    events: tuple[Event, ...] = field(default=())

    @property
    def duration_s(self) -> float:
        return self.settings.minutes * 60.0

    def requested_at(self, at_s: float) -> tuple[int, int]:
        """CPU (millicores) and memory (bytes) requested by the pods that exist at `at_s`."""
        cpu = memory = 0
        for workload in self.workloads:
            replicas = workload.replicas_at(at_s)
            cpu += replicas * workload.cpu_request_milli
            memory += replicas * workload.memory_request_bytes
        return cpu, memory

    def requested_share_at(self, at_s: float) -> tuple[float, float]:
        cpu, memory = self.requested_at(at_s)
        nodes = self.settings.nodes
        return cpu / (nodes * self.settings.node_cpu_milli), memory / (
            nodes * self.settings.node_memory_bytes
        )

    def pods(self) -> int:
        """Pods the trace creates in all (a service's scale-ups add pods; a job's pods are created once)."""
        return sum(max(replicas for _, replicas in workload.sizes) for workload in self.workloads)


def _weighted(rng: random.Random, choices: tuple[tuple[int, int], ...]) -> int:
    values = [value for value, _ in choices]
    weights = [weight for _, weight in choices]
    return rng.choices(values, weights)[0]


def cpu_ratio(rng: random.Random, cpu_request_milli: int) -> float:
    """A workload's CPU usage / request, from CPU_RATIO_BANDS; above 1 only for small requests."""
    draw = rng.random()
    band = CPU_RATIO_BANDS[-1]
    for candidate in CPU_RATIO_BANDS:
        if draw < candidate[0]:
            band = candidate
            break
        draw -= candidate[0]
    _, low, high = band
    if low > 1.0 and cpu_request_milli > HOT_REQUEST_LIMIT_MILLI:
        _, low, high = CPU_RATIO_BANDS[1]
    return rng.uniform(low, high)


def _workload_shape(rng: random.Random) -> tuple[int, int, Usage]:
    cpu_request = _weighted(rng, CPU_REQUESTS)
    memory_request = int(cpu_request / 1000 * rng.uniform(*MEMORY_PER_CORE_MIB)) * MIB
    usage = Usage(
        cpu_milli=max(1, round(cpu_request * cpu_ratio(rng, cpu_request))),
        memory_bytes=round(memory_request * rng.uniform(*MEMORY_RATIO)),
        disk_busy=round(rng.uniform(0.2, 2.0), 2),
        network=float(round(10 ** rng.uniform(4.0, 6.0))),
    )
    return cpu_request, memory_request, usage


def _batch(rng: random.Random, settings: TraceSettings) -> list[Workload]:
    duration = settings.minutes * 60.0
    rate = settings.batch_jobs_per_minute_per_100_nodes * settings.nodes / 100.0 / 60.0  # jobs per second
    jobs: list[Workload] = []
    at = rng.expovariate(rate)
    # Jobs arrive as a Poisson process until 90% of the trace; a job outlasting the trace runs to its end.
    while at < 0.9 * duration:
        name = f"job-{len(jobs):04d}"
        cpu_request, memory_request, usage = _workload_shape(rng)
        low, high = settings.batch_minutes
        length = 60.0 * math.exp(rng.uniform(math.log(low), math.log(high)))
        end = at + length
        jobs.append(
            Workload(
                name,
                "batch",
                cpu_request,
                memory_request,
                usage,
                round(at, 1),
                round(end, 1) if end < duration else None,
                ((round(at, 1), rng.randint(1, 4)),),
            )
        )
        at += rng.expovariate(rate)
    return jobs


def _services(rng: random.Random, settings: TraceSettings, room_milli: float) -> list[Workload]:
    """Services until they request `room_milli` at the end of the trace."""
    duration = settings.minutes * 60.0
    services: list[Workload] = []
    requested = 0.0
    while requested < room_milli:
        name = f"svc-{len(services):03d}"
        cpu_request, memory_request, usage = _workload_shape(rng)
        final = rng.randint(2, 12)
        final = max(1, min(final, math.ceil((room_milli - requested) / cpu_request)))
        arrive = round(rng.uniform(0.0, settings.services_ramp * duration), 1)
        initial = max(1, final // 2)
        sizes = [(arrive, initial)]
        # The rest arrive as scale-ups of one or two replicas at random later times.
        replicas = initial
        while replicas < final:
            replicas = min(final, replicas + rng.randint(1, 2))
            sizes.append((round(rng.uniform(arrive, settings.scale_until * duration), 1), replicas))
        times = sorted(at for at, _ in sizes)
        sizes = [(at, count) for at, (_, count) in zip(times, sizes, strict=True)]
        services.append(
            Workload(name, "service", cpu_request, memory_request, usage, arrive, None, tuple(sizes))
        )
        requested += final * cpu_request
    return services


def events_of(workloads: tuple[Workload, ...]) -> tuple[Event, ...]:
    events = []
    for workload in workloads:
        (first_at, first), *rest = workload.sizes
        events.append(Event(first_at, 1, workload.name, "create", first))
        events += [Event(at, 1, workload.name, "scale", replicas) for at, replicas in rest]
        if workload.end_s is not None:
            events.append(Event(workload.end_s, 0, workload.name, "delete"))
    return tuple(sorted(events))


def generate(settings: TraceSettings) -> Trace:
    """The trace for `settings`: batch jobs first (a Poisson process), then services until the cluster
    ends `requested_at_end` requested (CPU)."""
    rng = random.Random(settings.seed)
    batch = _batch(rng, settings)
    duration = settings.minutes * 60.0
    batch_at_end = sum(job.replicas_at(duration) * job.cpu_request_milli for job in batch)
    room = settings.requested_at_end * settings.nodes * settings.node_cpu_milli - batch_at_end
    services = _services(rng, settings, max(0.0, room))
    workloads = tuple(sorted((*services, *batch), key=lambda w: (w.arrive_s, w.name)))
    return Trace(settings, workloads, events_of(workloads))
