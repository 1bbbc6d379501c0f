"""Rebalance cycles: each policy whose spec.rebalance is not Off, every `interval`, on the leader only.

A cycle reads, per threshold plugin, the value each node held for the whole `sustainedFor` (one
subquery), and what the hot nodes' movable pods used over that window (one query per resource for all
of them, `rebalance_shares`). It plans move by move with `rebalance_plans.RebalancePlanning` (the
pods' replacements placed by the scheduler's own `decide()`), and in Enforce evicts each move before
the next is chosen, through the Eviction API, so PodDisruptionBudgets are honoured: a refusal (429) or
a failed request is a blocked move, not an error, and the node's next candidate is tried instead. A pod
whose eviction was refused is tried after the others for `REFUSED_COOLDOWN_SECONDS`. Evictions are
refused while the policy's metrics are not fresh, for a Shadow policy, and when the operator's kill
switch is on; the cycle then runs as DryRun and the status says why. A controller that lost a pod to a
move loses no other for `REPEAT_GUARD_SECONDS`, so no workload is moved twice in a row.

A cycle that fails (Prometheus unreachable, or a bug) is logged and counted, and the next one runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import aiohttp

from promsched.api.fields import Mode
from promsched.api.policies import SchedulingPolicySpec
from promsched.api.rebalances import (
    MAX_LISTED,
    BlockedMoveStatus,
    HotNodeStatus,
    RebalanceMode,
    RebalanceMoveStatus,
    RebalanceStatus,
)
from promsched.kube import requests
from promsched.kube.sending import ApiError, RenewalError, SupportsSend
from promsched.metrics.errors import PrometheusError
from promsched.metrics.snapshots import Snapshot
from promsched.metrics.sustaining import sustained_values
from promsched.scheduling import telemetry
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import decide
from promsched.scheduling.cycle.herding import herd_memory_seconds, herd_windows
from promsched.scheduling.cycle.memos import DecisionMemo, herd_adjustments
from promsched.scheduling.filters import DEFAULT_FILTERS
from promsched.scheduling.framework import Filter
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.selectors import LabelSelector, parse_label_selector
from promsched.scheduling.policies.runtimes import PolicyRuntime, PolicyRuntimes
from promsched.scheduling.rebalance.plans import (
    BlockReason,
    Destination,
    Limits,
    Move,
    RebalancePlan,
    RebalancePlanning,
    Threshold,
    hot_nodes,
)
from promsched.scheduling.rebalance.shares import PodShares, movable, observed_usage

logger = logging.getLogger(__name__)

REPEAT_GUARD_SECONDS = 600.0
# A PodDisruptionBudget allows a disruption again once a pod it covers is replaced and ready: minutes.
REFUSED_COOLDOWN_SECONDS = 300.0
RATE_WINDOW_SECONDS = 60.0
# The loop wakes at least this often to see which policy is due.
TICK_SECONDS = 5.0
EVICTION_REASON = "Rebalanced"

# Announces an evicted pod (an Event on it): pod, note, the policy's scheduler name.
Announce = Callable[[PodInfo, str, str], None]


@dataclass(frozen=True, slots=True)
class _Departure:
    """A pod the policy evicted, whose load its node's values keep showing until their window passes."""

    node: str
    at: float
    shares: Mapping[str, float]  # plugin -> points


@dataclass
class _PolicyCycles:
    """A policy's rebalance history: when it last ran, the controllers whose pods it moved, and the
    moves the metrics may not show yet."""

    last_cycle: float = 0.0
    moved_controllers: dict[str, float] = field(default_factory=dict)  # controller -> when
    refused: dict[str, float] = field(default_factory=dict)  # uid of a pod not evicted -> when
    evictions: int = 0
    departures: list[_Departure] = field(default_factory=list)


class Rebalancer:
    """Runs every policy's rebalance cycles; `evictions_allowed` is the operator's kill switch,
    `namespaces` those it may evict in (None: all)."""

    def __init__(
        self,
        sender: SupportsSend,
        cache: ClusterCache,
        runtimes: PolicyRuntimes,
        leading: asyncio.Event,
        announce: Announce,
        *,
        evictions_allowed: bool = True,
        namespaces: frozenset[str] | None = None,
        filters: tuple[Filter, ...] = DEFAULT_FILTERS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sender = sender
        self.cache = cache
        self.runtimes = runtimes
        self.leading = leading
        self.announce = announce
        self.evictions_allowed = evictions_allowed
        self.namespaces = namespaces
        self.filters = filters
        self.clock = clock
        self.cycles: dict[str, _PolicyCycles] = {}
        self.evicted_at: deque[float] = deque()  # cluster-wide, for maxEvictionsPerMinute

    async def run(self) -> None:
        while True:
            await self.leading.wait()
            for runtime in list(self.runtimes.policies.values()):
                if self._due(runtime):
                    started = time.monotonic()
                    try:
                        await self.cycle(runtime)
                    except (PrometheusError, ApiError) as error:
                        logger.warning("Rebalance of policy %s: %s", runtime.name, error)
                        telemetry.rebalance_cycle_errors.labels(runtime.name).inc()
                    except Exception:
                        # A bug in one cycle must not end rebalancing: the next cycle runs as usual.
                        logger.exception("Rebalance of policy %s failed unexpectedly", runtime.name)
                        telemetry.rebalance_cycle_errors.labels(runtime.name).inc()
                    telemetry.rebalance_cycle_duration.labels(runtime.name).observe(
                        time.monotonic() - started
                    )
            await asyncio.sleep(TICK_SECONDS)

    def _due(self, runtime: PolicyRuntime) -> bool:
        spec = runtime.spec
        if spec is None or spec.rebalance.mode is RebalanceMode.OFF or runtime.refresher is None:
            return False
        if runtime.invalid or runtime.conflict_with or runtime.held:
            return False
        history = self.cycles.get(runtime.name)
        return history is None or self.clock() - history.last_cycle >= spec.rebalance.interval_seconds

    async def cycle(self, runtime: PolicyRuntime) -> RebalancePlan | None:
        """One cycle of `runtime`'s policy; its status records it. None when it could not plan."""
        spec, refresher = runtime.spec, runtime.refresher
        if spec is None or refresher is None:
            return None
        now = self.clock()
        history = self.cycles.setdefault(runtime.name, _PolicyCycles())
        history.last_cycle = now
        snapshot = refresher.latest
        mode, why_dry = self._effective_mode(spec, snapshot, now)
        stale = _stale_plugins(spec, snapshot, now)
        if stale:
            self._record(runtime, mode, now, RebalancePlan(), f"metrics not fresh: {stale}; nothing moves")
            telemetry.rebalance_blocked.labels(BlockReason.METRICS_NOT_FRESH.value).inc()
            return None
        thresholds = _thresholds(spec)
        plugins = {plugin.name: plugin for plugin in snapshot.plan.plugins}
        sustained = await sustained_values(
            [(plugins[threshold.plugin], threshold.higher_is_better) for threshold in thresholds],
            refresher.client,
            self.cache.directory(),
            spec.rebalance.sustained_seconds,
            at=now,
            kept=snapshot.hostnames,
            stale_after=snapshot.plan.stale_after_seconds,
        )
        self._forget_old(history, now, herd_memory_seconds(snapshot.plan))
        current = _as_scheduling_sees(
            {
                threshold.plugin: {
                    node: sample.value for node, sample in snapshot.plugins[threshold.plugin].samples.items()
                }
                for threshold in thresholds
            },
            snapshot,
            self.cache,
            runtime.memo_for(snapshot),
            history.departures,
        )
        selector = _selector(spec)

        def candidates(node: str) -> list[PodInfo]:
            return [
                pod
                for pod in self.cache.node_pods.get(node, {}).values()
                if movable(pod, spec, selector, now, history.moved_controllers, self.namespaces) is None
            ]

        def destination_of(pod: PodInfo) -> Destination:
            replacement = dataclasses.replace(pod, node_name="", uid=f"{pod.uid}-replacement")
            outcome = decide(
                replacement,
                self.cache,
                snapshot,
                memo=runtime.memo_for(snapshot),
                filters=self.filters,
                preference_weight=spec.placement_preferences.weight,
            )
            return Destination(outcome.node, outcome.message)

        hot = {entry.node for entry in hot_nodes(thresholds, sustained, current)}
        usage = await observed_usage(
            refresher.client,
            refresher.observer.query_finished,
            thresholds,
            hot,
            candidates,
            spec.rebalance.sustained_seconds,
            now,
        )
        estimates = runtime.memo_for(snapshot).estimates_for(self.cache)
        shares = PodShares(self.cache, usage, spec.rebalance.sustained_for, estimates)
        limits = spec.rebalance.limits
        planning = RebalancePlanning(
            thresholds,
            sustained,
            current,
            candidates,
            shares.of,
            destination_of,
            Limits(
                limits.max_evictions_per_node,
                limits.max_evictions_per_cycle,
                max(0, limits.max_evictions_per_minute - len(self.evicted_at)),
            ),
            spec.rebalance.sustained_for,
            deferred=frozenset(history.refused),
        )
        for move in planning.moves():
            if mode is RebalanceMode.ENFORCE:
                await self._evict(runtime, spec, planning, move, history, now)
        plan = planning.plan()
        for blocked in plan.blocked:
            telemetry.rebalance_blocked.labels(blocked.kind.value).inc()
        self._record(runtime, mode, now, plan, why_dry)
        return plan

    def _effective_mode(
        self, spec: SchedulingPolicySpec, snapshot: Snapshot, now: float
    ) -> tuple[RebalanceMode, str]:
        mode = spec.rebalance.mode
        if mode is not RebalanceMode.ENFORCE:
            return mode, ""
        if spec.mode is Mode.SHADOW:
            return RebalanceMode.DRY_RUN, "a Shadow policy never evicts; ran as DryRun"
        if not self.evictions_allowed:
            return (
                RebalanceMode.DRY_RUN,
                "evictions are switched off (--no-rebalance-evictions); ran as DryRun",
            )
        return mode, ""

    def _forget_old(self, history: _PolicyCycles, now: float, shown_after: float) -> None:
        while self.evicted_at and now - self.evicted_at[0] > RATE_WINDOW_SECONDS:
            self.evicted_at.popleft()
        history.departures = [
            departure for departure in history.departures if now - departure.at <= shown_after
        ]
        for controller, when in list(history.moved_controllers.items()):
            if now - when > REPEAT_GUARD_SECONDS:
                del history.moved_controllers[controller]
        for uid, when in list(history.refused.items()):
            if now - when > REFUSED_COOLDOWN_SECONDS:
                del history.refused[uid]

    async def _evict(
        self,
        runtime: PolicyRuntime,
        spec: SchedulingPolicySpec,
        planning: RebalancePlanning,
        move: Move,
        history: _PolicyCycles,
        now: float,
    ) -> None:
        """Evict the move's pod; one the API refuses, or that the request fails for, is refused in
        `planning` and tried after the others for a while."""
        pod = move.pod
        try:
            await self.sender.send(requests.evict_pod(pod.namespace, pod.name, pod.uid))
        except ApiError as error:
            kind = BlockReason.DISRUPTION_BUDGET if error.status == 429 else BlockReason.EVICTION_FAILED
            planning.refuse(move, kind, _refusal(error))
            history.refused[pod.uid] = now
            return
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            # Not sent (no connection, no credentials): nothing left. Else the API server may have
            # evicted the pod before the answer was lost: the limits count it.
            unsent = isinstance(error, (aiohttp.ClientConnectorError, RenewalError))
            planning.refuse(
                move,
                BlockReason.EVICTION_FAILED,
                f"eviction failed: {type(error).__name__}: {error}"
                + ("" if unsent else " (the pod may have been evicted)"),
                may_have_left=not unsent,
            )
            history.refused[pod.uid] = now
            logger.warning("Rebalance of policy %s: evicting %s failed: %r", runtime.name, pod.key, error)
            return
        history.evictions += 1
        history.departures.append(_Departure(move.source, now, move.shares))
        self.evicted_at.append(now)
        if pod.controller:
            history.moved_controllers[pod.controller] = now
        telemetry.rebalance_evictions.labels(runtime.name, move.plugin).inc()
        self.announce(pod, f"Evicted by promsched: {move.reason}", spec.scheduler_name)

    def _record(
        self, runtime: PolicyRuntime, mode: RebalanceMode, now: float, plan: RebalancePlan, message: str
    ) -> None:
        history = self.cycles.get(runtime.name, _PolicyCycles())
        hot_nodes = {entry.node for entry in plan.hot}
        status = RebalanceStatus(
            mode=mode,
            last_cycle=datetime.fromtimestamp(now, UTC),
            hot_node_count=len(hot_nodes),
            hot_nodes=[
                HotNodeStatus(node=entry.node, plugin=entry.plugin, value=round(entry.sustained, 2))
                for entry in plan.hot[:MAX_LISTED]
            ],
            moves=[
                RebalanceMoveStatus(
                    pod=move.pod.key,
                    node=move.source,
                    destination=move.destination,
                    reason=move.reason[:1024],
                )
                for move in plan.moves[:MAX_LISTED]
            ],
            blocked=[
                BlockedMoveStatus(node=entry.node, pod=entry.pod, reason=entry.reason[:1024])
                for entry in plan.blocked[:MAX_LISTED]
            ],
            evictions=history.evictions,
            message=message[:1024],
        )
        runtime.status.record_rebalance(status)


def _as_scheduling_sees(
    current: dict[str, dict[str, float]],
    snapshot: Snapshot,
    cache: ClusterCache,
    memo: DecisionMemo,
    departures: list[_Departure],
) -> dict[str, dict[str, float]]:
    """The snapshot's values with what they cannot show yet, as placement counts it: plus the load of
    pods placed since (decide()'s herd adjustment, so a destination is judged as decide() judged it),
    less the load of pods this policy evicted since, so a node whose relief the metrics have not caught
    up with is not relieved twice."""
    windows = {window.plugin: window for window in herd_windows(snapshot)}
    arriving = herd_adjustments(cache, memo, {node for values in current.values() for node in values})
    leaving: dict[tuple[str, str], float] = {}
    for departure in departures:
        for plugin, share in departure.shares.items():
            window = windows.get(plugin)
            if window is not None:
                key = (departure.node, plugin)
                leaving[key] = leaving.get(key, 0.0) + share * window.unseen(departure.at)
    return {
        plugin: {
            node: max(0.0, value + arriving.get(node, {}).get(plugin, 0.0) - leaving.get((node, plugin), 0.0))
            for node, value in values.items()
        }
        if plugin in windows
        else values
        for plugin, values in current.items()
    }


def _thresholds(spec: SchedulingPolicySpec) -> list[Threshold]:
    thresholds = []
    for entry in spec.rebalance.thresholds:
        plugin = spec.plugin(entry.plugin)
        assert plugin is not None  # the spec's validation names only its own plugins
        thresholds.append(
            Threshold(
                entry.plugin,
                entry.hot_threshold,
                entry.target_threshold,
                higher_is_better=bool(plugin.higher_is_better),
                is_percent=plugin.is_builtin,
            )
        )
    return thresholds


def _stale_plugins(spec: SchedulingPolicySpec, snapshot: Snapshot, now: float) -> str:
    """The threshold plugins whose values are missing, failed or older than staleAfter, and why."""
    problems = []
    for entry in spec.rebalance.thresholds:
        plugin = snapshot.plugins.get(entry.plugin)
        if plugin is None or plugin.refreshed_at is None:
            problems.append(f"{entry.plugin} (no values yet)")
        elif plugin.error is not None:
            problems.append(f"{entry.plugin} ({plugin.error})")
        elif now - plugin.refreshed_at > spec.stale_after_seconds:
            problems.append(f"{entry.plugin} (refreshed {now - plugin.refreshed_at:.0f}s ago)")
    return ", ".join(problems)


def _selector(spec: SchedulingPolicySpec) -> LabelSelector | None:
    chosen = spec.rebalance.pods.selector
    return (
        None if chosen is None else parse_label_selector(chosen.to_object(), "spec.rebalance.pods.selector")
    )


def _refusal(error: ApiError) -> str:
    if error.status == 429:
        return f"eviction refused by a PodDisruptionBudget: {error.message}"
    return f"eviction failed: {error.status} {error.reason}: {error.message}"
