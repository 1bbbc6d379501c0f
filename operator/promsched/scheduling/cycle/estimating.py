"""What a pod is expected to use: its siblings' observed usage, else the policy's rule (spec.estimation).

Siblings are the running pods of the same controller (a ReplicaSet, StatefulSet, Job...). Per snapshot,
the pods' usage (one query per resource, `metrics.usage_querying`) is grouped by controller once, and
each controller's percentile is worked out the first time a pod of it needs one (kube's PreScore
computes what every node's Score reads, once per cycle; this does it once per refresh), so estimating a
pod is a lookup. A young sibling's CPU rate is read over its life, not the whole window
(`rated_over_life`). Where no sibling shows usage of a resource, the rule holds: the limit (with
useLimits, when the pod sets one), else factor x the request, else the policy's amount for a pod that
requests none.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from promsched.api.builtins import BuiltinPlugin
from promsched.api.estimations import Estimation
from promsched.api.statuses import UsageEstimate
from promsched.metrics.snapshots import Snapshot
from promsched.metrics.usage_querying import PodKey
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.resources import Resources, parse_quantity

_BINARY_UNITS = ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki"))


class EstimateSource(StrEnum):
    """Where an estimate came from (the `source` label of promsched_pod_estimates_total)."""

    SIBLINGS = "siblings"
    LIMIT = "limit"
    REQUEST = "request"
    UNREQUESTED = "unrequested"


@dataclass(frozen=True, slots=True)
class ResourceEstimate:
    """One resource's estimate: millicores or bytes, and how it was reached."""

    amount: int
    source: EstimateSource
    siblings: int = 0  # SIBLINGS: how many running siblings showed usage
    percentile: int = 0  # SIBLINGS: which percentile of theirs
    factor: float = 1.0  # REQUEST: the factor applied to the request
    requested: int = 0  # REQUEST: the request

    def basis(self, owner: str, *, cpu: bool) -> str:
        """How the amount was reached, e.g. ``p90 of 5 running siblings (ReplicaSet/web-7d9)``."""
        if self.source is EstimateSource.SIBLINGS:
            plural = "s" if self.siblings != 1 else ""
            return f"p{self.percentile} of {self.siblings} running sibling{plural} ({owner})"
        if self.source is EstimateSource.LIMIT:
            return "the pod's limit"
        if self.source is EstimateSource.REQUEST:
            request = format_milli_cpu(self.requested) if cpu else format_bytes(self.requested)
            return f"{self.factor:g} x request {request}"
        return "no request: the policy's unrequested amount"


@dataclass(frozen=True, slots=True)
class Estimate:
    """What a pod is expected to use."""

    cpu: ResourceEstimate
    memory: ResourceEstimate
    owner: str = ""  # the pod's controller, "Kind/name"

    def to_api(self) -> UsageEstimate:
        """The decision's record (status and annotation)."""
        return UsageEstimate(
            milli_cpu=self.cpu.amount,
            memory=self.memory.amount,
            cpu_basis=self.cpu.basis(self.owner, cpu=True),
            memory_basis=self.memory.basis(self.owner, cpu=False),
        )


def format_milli_cpu(milli: int) -> str:
    return f"{milli}m" if milli % 1000 else str(milli // 1000)


def format_bytes(amount: int) -> str:
    for factor, suffix in _BINARY_UNITS:
        if amount >= factor:
            return f"{amount / factor:.3g}{suffix}"
    return str(amount)


def percentile(values: Sequence[float], rank_percent: int) -> float:
    """The nearest-rank percentile of `values` (not empty): the smallest value at least `rank_percent`%
    of them do not exceed; 100 is the largest."""
    ordered = sorted(values)
    rank = max(1, math.ceil(rank_percent * len(ordered) / 100))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class _Rule:
    """spec.estimation with its quantities in millicores and bytes."""

    siblings: bool
    percentile: int
    cpu_factor: float
    memory_factor: float
    use_limits: bool
    unrequested_milli_cpu: int
    unrequested_memory: int

    @classmethod
    def of(cls, estimation: Estimation) -> _Rule:
        unrequested = estimation.unrequested
        return cls(
            siblings=estimation.queries_usage,
            percentile=estimation.percentile,
            cpu_factor=estimation.fallback.cpu_factor,
            memory_factor=estimation.fallback.memory_factor,
            use_limits=estimation.fallback.use_limits,
            unrequested_milli_cpu=parse_quantity(
                unrequested.cpu, "spec.estimation.unrequested.cpu", milli=True
            ),
            unrequested_memory=parse_quantity(unrequested.memory, "spec.estimation.unrequested.memory"),
        )


def _by_rule(
    requested: int, limit: int, factor: float, unrequested: int, use_limits: bool
) -> ResourceEstimate:
    if use_limits and limit:
        return ResourceEstimate(limit, EstimateSource.LIMIT)
    if requested:
        return ResourceEstimate(
            round(factor * requested), EstimateSource.REQUEST, factor=factor, requested=requested
        )
    return ResourceEstimate(unrequested, EstimateSource.UNREQUESTED)


OwnerKey = tuple[str, str]  # (namespace, "Kind/name")
_Observed = tuple[ResourceEstimate | None, ResourceEstimate | None]


class Estimates:
    """The estimates of one snapshot, for the pods of `cache`; build one per snapshot (the decision
    memo does) and ask it per pod."""

    def __init__(self, snapshot: Snapshot, cache: ClusterCache) -> None:
        self.snapshot = snapshot
        self.rule = _Rule.of(snapshot.plan.estimation)
        self._cache = cache
        self._observed: dict[OwnerKey, _Observed] = {}
        # owner -> [cpu cores], [memory bytes] of its running pods, grouped at the first need.
        self._usage: dict[OwnerKey, tuple[list[float], list[float]]] | None = None
        # uid -> the pod state estimated and its estimate: the herd load asks again for each pod placed
        # on a node whenever another is placed there.
        self._estimated: dict[str, tuple[PodInfo, Estimate]] = {}

    def of(self, pod: PodInfo) -> Estimate:
        known = self._estimated.get(pod.uid)
        if known is not None and known[0] is pod:
            return known[1]
        estimate = self._estimate(pod)
        self._estimated[pod.uid] = (pod, estimate)
        return estimate

    def _estimate(self, pod: PodInfo) -> Estimate:
        rule = self.rule
        cpu = memory = None
        if rule.siblings and pod.controller:
            cpu, memory = self._siblings((pod.namespace, pod.controller))
        limits, requests = pod.limits, pod.requests
        if cpu is None:
            cpu = _by_rule(
                requests.milli_cpu,
                limits.milli_cpu,
                rule.cpu_factor,
                rule.unrequested_milli_cpu,
                rule.use_limits,
            )
        if memory is None:
            memory = _by_rule(
                requests.memory, limits.memory, rule.memory_factor, rule.unrequested_memory, rule.use_limits
            )
        return Estimate(cpu, memory, pod.controller)

    def _siblings(self, owner: OwnerKey) -> _Observed:
        known = self._observed.get(owner)
        if known is None:
            usage = self._grouped().get(owner)
            if usage is None:
                known = (None, None)
            else:
                cores, memory = usage
                known = (
                    self._observed_estimate([1000.0 * value for value in cores]),
                    self._observed_estimate(memory),
                )
            self._observed[owner] = known
        return known

    def _observed_estimate(self, values: list[float]) -> ResourceEstimate | None:
        if not values:
            return None
        amount = round(percentile(values, self.rule.percentile))
        return ResourceEstimate(
            amount, EstimateSource.SIBLINGS, siblings=len(values), percentile=self.rule.percentile
        )

    def _grouped(self) -> dict[OwnerKey, tuple[list[float], list[float]]]:
        """Each controller's running pods' usage: the pods counted on nodes that have series."""
        if self._usage is None:
            snapshot = self.snapshot
            fresh_since = snapshot.taken_at - snapshot.plan.stale_after_seconds
            cpu_usage = snapshot.usage.cpu
            cpu = cpu_usage.fresh_values(fresh_since)
            memory = snapshot.usage.memory.fresh_values(fresh_since)
            cpu_read = (cpu_usage.refreshed_at or 0.0, snapshot.plan.estimation.window_seconds)
            self._usage = _group_by_owner(self._cache, cpu, memory, cpu_read) if cpu or memory else {}
        return self._usage


# A sibling younger than this is left out of the CPU percentile: its rate rests on a sample or two.
SETTLING_SECONDS: Final = 30.0


def rated_over_life(cores: float, started_at: float | None, read_at: float, window_seconds: float) -> float:
    """What a pod used, from its `rate()` over the window read at `read_at`: Prometheus divides the
    increase by the whole window, and a pod's counter only began when it started (its increase is
    extrapolated back to zero, no further), so a pod younger than the window reads age/window of its
    real rate; scaled back by window/age. An unknown start counts as older than the window."""
    if started_at is None:
        return cores
    age = read_at - started_at
    return cores if age >= window_seconds else cores * window_seconds / age


def _group_by_owner(
    cache: ClusterCache,
    cpu: Mapping[PodKey, float],
    memory: Mapping[PodKey, float],
    cpu_read: tuple[float, float],
) -> dict[OwnerKey, tuple[list[float], list[float]]]:
    """`cpu_read` is when the CPU query was read and the window it rated over."""
    read_at, window_seconds = cpu_read
    grouped: defaultdict[OwnerKey, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for _node, pod in cache.counted.values():
        if not pod.controller:
            continue
        key = (pod.namespace, pod.name)
        cores, used = cpu.get(key), memory.get(key)
        if cores is not None:
            if pod.started_at is not None and read_at - pod.started_at < SETTLING_SECONDS:
                cores = None
            else:
                cores = rated_over_life(cores, pod.started_at, read_at, window_seconds)
        if cores is None and used is None:
            continue
        values = grouped[(pod.namespace, pod.controller)]
        if cores is not None:
            values[0].append(cores)
        if used is not None:
            values[1].append(used)
    return dict(grouped)


# The plugins whose values (percent of allocatable) a pod's estimate adds to: the resource each reads
# from a node's allocatable, and from an estimate.
ESTIMATED_PLUGINS: dict[str, tuple[Callable[[Resources], int], Callable[[Estimate], int]]] = {
    BuiltinPlugin.CPU.value: (lambda resources: resources.milli_cpu, lambda estimate: estimate.cpu.amount),
    BuiltinPlugin.MEMORY.value: (lambda resources: resources.memory, lambda estimate: estimate.memory.amount),
}


def requested_shares(cache: ClusterCache) -> Callable[[str], dict[str, float]]:
    """Per node, the share (percent) of its allocatable that the pods counted on it request, by
    estimated plugin: what onMissingMetrics Requests scores a node by where a sample is missing."""

    def shares(node: str) -> dict[str, float]:
        info, usage = cache.nodes.get(node), cache.usage.get(node)
        if info is None or usage is None:
            return {}
        found = {}
        for plugin, (amount_of, _estimated) in ESTIMATED_PLUGINS.items():
            allocatable = amount_of(info.allocatable)
            if allocatable:
                found[plugin] = 100.0 * amount_of(usage.requested) / allocatable
        return found

    return shares
