"""The rebalance proof's measures, pure: hot-node-seconds after the drift, evictions per workload, repeat
evictions and PodDisruptionBudget violations.

Times are Unix seconds. A grid is `bench.quality_measures`'s: node -> one value per step from `start`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bench.quality_measures import Grid, hot_nodes

# A workload that loses two pods to evictions within this window is a repeat (the issue's "evicted twice
# within 10 minutes").
REPEAT_WINDOW_S = 600.0
# A budget shortfall counts against an eviction for this long after it: the replacement is created,
# scheduled and Running within seconds in the sandbox, and the budget's status follows within a few more.
SHORTFALL_AFTER_S = 60.0


@dataclass(frozen=True)
class Eviction:
    pod: str
    workload: str
    at: float
    message: str = ""


@dataclass(frozen=True)
class BudgetSample:
    """One PodDisruptionBudget's status at one moment."""

    at: float
    budget: str
    current_healthy: int
    desired_healthy: int
    disruptions_allowed: int
    expected_pods: int


def workload_of(pod: str) -> str:
    """The ReplicaSet a pod belongs to: its generated name is `<replicaset>-<5 characters>`."""
    return pod.rsplit("-", 1)[0] if "-" in pod else pod


def event_time(event: Mapping[str, Any]) -> float:
    """When an Event happened: eventTime (events.k8s.io), else lastTimestamp, firstTimestamp, creation."""
    metadata = event.get("metadata") or {}
    for stamp in (
        event.get("eventTime"),
        event.get("lastTimestamp"),
        event.get("firstTimestamp"),
        metadata.get("creationTimestamp"),
    ):
        if stamp:
            return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    return math.nan


def evictions_of(events: Iterable[Mapping[str, Any]], reason: str) -> list[Eviction]:
    """The evictions recorded as Events with `reason`, one per pod, in time order."""
    seen: dict[str, Eviction] = {}
    for event in events:
        if event.get("reason") != reason:
            continue
        pod = str((event.get("involvedObject") or {}).get("name", ""))
        if pod and pod not in seen:
            seen[pod] = Eviction(pod, workload_of(pod), event_time(event), str(event.get("message", "")))
    return sorted(seen.values(), key=lambda eviction: (eviction.at, eviction.pod))


def repeat_evicted(evictions: Sequence[Eviction], window: float = REPEAT_WINDOW_S) -> dict[str, int]:
    """Workloads that lost two pods or more to evictions less than `window` apart: workload -> how many
    such pairs (consecutive evictions)."""
    times: dict[str, list[float]] = {}
    for eviction in evictions:
        times.setdefault(eviction.workload, []).append(eviction.at)
    repeats = {}
    for workload, stamps in times.items():
        ordered = sorted(stamps)
        pairs = sum(later - earlier < window for earlier, later in itertools.pairwise(ordered))
        if pairs:
            repeats[workload] = pairs
    return dict(sorted(repeats.items()))


def budget_violations(
    samples: Sequence[BudgetSample],
    evictions: Sequence[Eviction],
    growths: Mapping[str, Sequence[float]],
    after: float = SHORTFALL_AFTER_S,
) -> list[BudgetSample]:
    """Samples in which a budget had fewer healthy pods than it requires (currentHealthy <
    desiredHealthy) within `after` seconds of one of its workload's evictions, and not within `after`
    of the workload's own creation or scale-up (whose new pods are unhealthy until they run, which
    disrupts nothing). A budget is named as its workload."""
    evicted: dict[str, list[float]] = {}
    for eviction in evictions:
        evicted.setdefault(eviction.workload, []).append(eviction.at)

    def near(stamps: Iterable[float], at: float) -> bool:
        return any(0.0 <= at - stamp <= after for stamp in stamps)

    return [
        sample
        for sample in samples
        if sample.current_healthy < sample.desired_healthy
        and near(evicted.get(sample.budget, ()), sample.at)
        and not near(growths.get(sample.budget, ()), sample.at)
    ]


def short_samples(samples: Sequence[BudgetSample]) -> int:
    """Samples in which a budget had fewer healthy pods than it requires, whatever the cause."""
    return sum(sample.current_healthy < sample.desired_healthy for sample in samples)


def hot_node_seconds_since(grid: Grid, start: float, step: float, since: float, threshold: float) -> float:
    """Hot-node-seconds (nodes above `threshold` at each step, times the step) from `since` on."""
    first = max(0, math.ceil((since - start) / step - 1e-9))
    return step * sum(hot_nodes(grid, threshold)[first:])


def metric_sums(text: str, name: str, label: str) -> dict[str, float]:
    """A counter's values in Prometheus text exposition, summed by one label's value."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        series, _, number = line.rpartition(" ")
        if series != name and not series.startswith(name + "{"):
            continue
        key = ""
        marker = f'{label}="'
        if marker in series:
            key = series.split(marker, 1)[1].split('"', 1)[0]
        sums[key] = sums.get(key, 0.0) + float(number)
    return dict(sorted(sums.items()))
