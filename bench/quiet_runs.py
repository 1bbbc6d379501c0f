"""The parked-pods bench's data: its settings, the room it frees for half the pods, what one scheduler's
run observed (the API server's counters over time, its pods' binding times, its Events) and the summary
of that run."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.pods import PodTimes
from bench.quality_measures import percentile
from bench.requestcounts import (
    Counts,
    RequestKey,
    difference,
    event_occurrences,
    net_of_baseline,
    per_minute,
    regarded,
    scheduling_total,
    writes,
)
from bench.variants import Variant

MAX_PODS_PER_NODE = 110  # the sandbox nodes' allocatable pods
# The benchmark's own writes while it measures: its pod creates and the node patches that free room.
OWN_WRITES = (RequestKey("POST", "", "pods"), RequestKey("PATCH", "", "nodes"))


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
