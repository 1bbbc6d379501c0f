"""SchedulingPolicies as the scheduler runs them: each one's refresher, conditions and status writes.

`PolicyRuntimes` follows the policy objects (`on_policy`), keeps one `PolicyRuntime` per policy, and
decides which policy serves each scheduler name (the oldest valid one; younger claimants are in
Conflict; an Enforce policy for `default-scheduler` is held while kube-scheduler runs), and so which
pending pods are the scheduler's to place (`schedules`). A policy's
conditions are a pure function of its runtime (`policy_conditions`). The refresher is made by an
injected factory, so tests give their own without touching the network.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import yarl

from promsched.api.fields import Mode, PolicyError
from promsched.api.policies import SchedulingPolicy, SchedulingPolicySpec
from promsched.api.statuses import Condition, ConditionType, parse_status
from promsched.kube import requests
from promsched.kube.sending import ApiError, SupportsSend
from promsched.metrics.errors import PrometheusError
from promsched.metrics.identifying import NodeDirectory
from promsched.metrics.planning import Plan, endpoint_from_policy, plan_from_policy
from promsched.metrics.preflighting import preflight_report
from promsched.metrics.querying import PrometheusEndpoint, SecretReader
from promsched.metrics.refreshing import Refresher, RefreshObserver, TaskStarter
from promsched.metrics.scoring import ScoreMemo
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling import telemetry
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.herding import herd_memory_seconds
from promsched.scheduling.cycle.memos import DecisionMemo
from promsched.scheduling.loop_lag_watching import Refreshes
from promsched.scheduling.objects.pods import DEFAULT_SCHEDULER_NAME, PodInfo
from promsched.scheduling.policies.kube_scheduler_checking import KubeSchedulerCheck
from promsched.scheduling.policies.recording import PolicyStatus, condition

logger = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000
# The pods a Shadow policy has decided that are remembered, so they are not queued again.
SHADOWED_KEPT = 10_000


class HostNotAllowed(ValueError):
    """A policy's Prometheus URL is outside the operator's allowlist."""


class RefresherFactory(Protocol):
    """What makes a policy's Refresher; `run_task` starts its refresh loop (None: a plain task)."""

    def __call__(
        self,
        plan: Plan,
        endpoint: PrometheusEndpoint,
        nodes: Callable[[], NodeDirectory],
        *,
        observer: RefreshObserver,
        run_task: TaskStarter | None,
    ) -> Refresher: ...


@dataclass
class PolicyRuntime:
    """One SchedulingPolicy as the scheduler runs it."""

    name: str
    created: str
    status: PolicyStatus
    policy: SchedulingPolicy | None = None  # None while the object is invalid
    refresher: Refresher | None = None
    refreshing_since: float = 0.0  # when `refresher` was started (unix time)
    invalid: str = ""  # why the policy cannot run (spec, endpoint, allowlist)
    conflict_with: str = ""  # the older policy holding the same scheduler name
    held: str = ""  # why the policy may not bind now although valid (kube-scheduler runs)
    preflight_task: asyncio.Task[None] | None = field(default=None, repr=False)
    memo: DecisionMemo | None = field(default=None, repr=False)

    def memo_for(self, snapshot: Snapshot) -> DecisionMemo:
        """What decisions on `snapshot` work out once; a new snapshot starts a new memo, which takes over
        from the last (`DecisionMemo.succeeded_by`)."""
        if self.memo is None or self.memo.snapshot is not snapshot:
            scores = self.refresher.scores_for(snapshot) if self.refresher is not None else ScoreMemo()
            if self.memo is None:
                self.memo = DecisionMemo(snapshot, scores)
            else:
                succeeded, self.memo = self.memo, self.memo.succeeded_by(snapshot, scores)
                # Unless its snapshot is still the refresher's latest (a rebalance cycle decided on an
                # older one in between): its scores are then the refresher's, for the next pod.
                if self.refresher is None or self.refresher.latest is not succeeded.snapshot:
                    succeeded.let_go()
        return self.memo

    @property
    def spec(self) -> SchedulingPolicySpec | None:
        return self.policy.spec if self.policy else None

    @property
    def scheduler_name(self) -> str:
        return self.policy.spec.scheduler_name if self.policy else ""

    @property
    def generation(self) -> int:
        return self.policy.generation if self.policy else 0

    @property
    def claims_default_scheduler(self) -> bool:
        spec = self.spec
        return (
            spec is not None and spec.mode is Mode.ENFORCE and spec.scheduler_name == DEFAULT_SCHEDULER_NAME
        )


def has_refreshed(snapshot: Snapshot) -> bool:
    """Whether any query of the snapshot's plan has been answered (with samples or an error)."""
    return any(p.refreshed_at is not None or p.error is not None for p in snapshot.plugins.values())


def policy_conditions(runtime: PolicyRuntime, nodes: Iterable[str]) -> list[Condition]:
    """Ready, Conflict, PrometheusReachable and MetricsComplete, from the runtime's state alone."""
    generation = runtime.generation or None
    holder = runtime.conflict_with
    held = runtime.held
    conflict = condition(
        ConditionType.CONFLICT,
        bool(holder or held),
        "SchedulerNameTaken" if holder else "KubeSchedulerRunning" if held else "NoConflict",
        f"schedulerName {runtime.scheduler_name!r} is served by the older policy {holder!r}"
        if holder
        else held[:MESSAGE_LIMIT],
        generation,
    )
    reachable_ok, reachable_reason, reachable_message = False, "Pending", "no refresh yet"
    complete_ok, complete_reason, complete_message = False, "Pending", "no refresh yet"
    if runtime.refresher is not None and has_refreshed(runtime.refresher.latest):
        snapshot = runtime.refresher.latest
        errors = snapshot.errors
        reachable_ok = not errors
        reachable_reason = "QueriesSucceeded" if reachable_ok else "QueryFailed"
        reachable_message = "; ".join(f"{plugin}: {error}" for plugin, error in errors.items())
        names = list(nodes)
        gaps = []
        for plugin, plugin_snapshot in snapshot.plugins.items():
            missing = [node for node in names if node not in plugin_snapshot.samples]
            if missing:
                gaps.append(f"{plugin}: {len(missing)} node(s) without series ({', '.join(missing[:5])})")
        complete_ok = not gaps
        complete_reason = "AllNodesHaveSeries" if complete_ok else "SeriesMissing"
        # Warnings (a partial answer among them) do not stop scheduling; they are said, not dropped.
        warned = [
            f"{plugin}: Prometheus warns: {plugin_snapshot.report.warnings[0]}"
            for plugin, plugin_snapshot in snapshot.plugins.items()
            if plugin_snapshot.report.warnings and plugin_snapshot.error is None
        ]
        complete_message = "; ".join([*gaps, *warned])
    reachable = condition(
        ConditionType.PROMETHEUS_REACHABLE,
        reachable_ok,
        reachable_reason,
        reachable_message[:MESSAGE_LIMIT],
        generation,
    )
    complete = condition(
        ConditionType.METRICS_COMPLETE,
        complete_ok,
        complete_reason,
        complete_message[:MESSAGE_LIMIT],
        generation,
    )
    if runtime.invalid:
        ready = condition(
            ConditionType.READY, False, "InvalidPolicy", runtime.invalid[:MESSAGE_LIMIT], generation
        )
    elif holder or held:
        ready = condition(ConditionType.READY, False, "Conflict", conflict.message, generation)
    elif not reachable_ok:
        message = f"scheduling with missing metrics as spec.onMissingMetrics says: {reachable_message}"
        ready = condition(
            ConditionType.READY, False, "PrometheusUnavailable", message[:MESSAGE_LIMIT], generation
        )
    else:
        ready = condition(ConditionType.READY, True, "Scheduling", "", generation)
    return [ready, conflict, reachable, complete]


class _PolicyObserver(RefreshObserver):
    def __init__(self, runtimes: PolicyRuntimes, runtime: PolicyRuntime) -> None:
        self.runtimes = runtimes
        self.runtime = runtime
        self.refreshed = False

    def query_finished(self, plugin: str, seconds: float, error: PrometheusError | None) -> None:
        telemetry.query_duration.labels(self.runtime.name, plugin).observe(seconds)
        if error is not None:
            telemetry.query_errors.labels(self.runtime.name, plugin).inc()

    def query_warned(self, plugin: str, warnings: tuple[str, ...]) -> None:
        telemetry.query_warnings.labels(self.runtime.name, plugin).inc()

    def refresh_started(self) -> None:
        self.runtimes.refreshes.started += 1

    def refresh_ended(self) -> None:
        self.runtimes.refreshes.finished += 1

    def snapshot_taken(self, snapshot: Snapshot) -> None:
        for plugin in snapshot.plugins:
            age = snapshot.age_seconds(plugin, time.time())
            if age is not None:
                telemetry.metric_age.labels(self.runtime.name, plugin).set(age)
        self.runtimes.update_conditions(self.runtime)
        self.runtimes.on_snapshot(first=not self.refreshed)
        self.refreshed = True


class PolicyRuntimes:
    """The policies as the scheduler runs them; `namespaces` are those whose pods it places (None: every
    namespace)."""

    def __init__(
        self,
        sender: SupportsSend,
        cache: ClusterCache,
        *,
        spawn: Callable[[Awaitable[None]], asyncio.Task[None]],
        on_snapshot: Callable[..., None],
        read_secret: SecretReader | None = None,
        allowed_hosts: frozenset[str] | None = None,
        refresher_factory: RefresherFactory = Refresher,
        run_task: TaskStarter | None = None,
        namespaces: frozenset[str] | None = None,
        refreshes: Refreshes | None = None,
    ) -> None:
        self.sender = sender
        self.cache = cache
        self.refreshes = refreshes or Refreshes()  # every policy's, for the loop-lag watcher
        self.spawn = spawn
        self.on_snapshot = on_snapshot  # called with first=True at a policy's first snapshot
        self.read_secret = read_secret
        self.allowed_hosts = allowed_hosts
        self.refresher_factory = refresher_factory
        self.run_task = run_task
        self.kube_scheduler = KubeSchedulerCheck(sender)
        self.policies: dict[str, PolicyRuntime] = {}
        self.owners: dict[str, PolicyRuntime] = {}  # scheduler name -> the policy serving it
        self.namespaces = namespaces
        self.shadowed: OrderedDict[str, None] = OrderedDict()  # uids, the latest decided last

    def schedules(self, pod: PodInfo) -> bool:
        """Whether the pending `pod` is the scheduler's to place: a policy serves its scheduler name, its
        namespace is one placed, no scheduling gate holds it, and no Shadow policy has decided it yet."""
        return (
            pod.scheduler_name in self.owners
            and (self.namespaces is None or pod.namespace in self.namespaces)
            and not pod.scheduling_gated
            and pod.uid not in self.shadowed
        )

    def shadow(self, uid: str) -> None:
        """A Shadow policy decided the pod: it is not queued again (`schedules`)."""
        self.shadowed[uid] = None
        while len(self.shadowed) > SHADOWED_KEPT:
            self.shadowed.popitem(last=False)

    async def on_policy(self, event_type: str, obj: Mapping[str, Any]) -> PolicyRuntime | None:
        """Apply a policy event; returns the runtime whose pods need another look, if any."""
        metadata = obj.get("metadata", {})
        name = metadata.get("name", "")
        if event_type == "DELETED":
            runtime = self.policies.pop(name, None)
            if runtime is not None:
                await self._stop(runtime)
            self.assign_owners()
            return None
        runtime = self.policies.get(name)
        try:
            policy = SchedulingPolicy.from_object(obj)
        except PolicyError as error:
            policy = None
            problem = str(error)
        else:
            problem = ""
        if runtime is None:
            stored = policy.status if policy and policy.status else parse_status(None)
            history = policy.spec.decision_history if policy else 10
            runtime = PolicyRuntime(
                name, metadata.get("creationTimestamp", ""), PolicyStatus.resume(stored, history)
            )
            self.policies[name] = runtime
        elif policy is not None and runtime.policy is not None and policy.generation == runtime.generation:
            return None  # a status write (ours) or a metadata change: nothing to apply
        if policy is None:
            runtime.invalid = problem
            runtime.policy = None
            await self._stop_refresher(runtime)
        else:
            await self._apply(runtime, policy)
        runtime.status.observed_generation = int(metadata.get("generation", 0))
        if runtime.claims_default_scheduler:
            await self.kube_scheduler.check()  # known before the policy may bind a pod
        self.assign_owners()
        self.update_conditions(runtime)
        return runtime

    async def _apply(self, runtime: PolicyRuntime, policy: SchedulingPolicy) -> None:
        spec = policy.spec
        runtime.policy = policy
        runtime.status.history = spec.decision_history
        try:
            self._check_allowed(spec.prometheus.url)
            endpoint = await endpoint_from_policy(spec.prometheus, self.read_secret)
        except ValueError as error:
            runtime.invalid = str(error)
            await self._stop_refresher(runtime)
            return
        runtime.invalid = ""
        plan = plan_from_policy(spec)
        self.cache.placement_memory = max(self.cache.placement_memory, herd_memory_seconds(plan))
        if runtime.refresher is None:
            runtime.refresher = self.refresher_factory(
                plan,
                endpoint,
                self.cache.directory,
                observer=_PolicyObserver(self, runtime),
                run_task=self.run_task,
            )
            runtime.refreshing_since = time.time()
        else:
            await runtime.refresher.update(plan, endpoint)
        if runtime.preflight_task is not None:
            runtime.preflight_task.cancel()
        runtime.preflight_task = self.spawn(self._preflight(runtime))

    def _check_allowed(self, url: str) -> None:
        if self.allowed_hosts is None:
            return
        host = yarl.URL(url).host or ""
        if host not in self.allowed_hosts:
            allowed = ", ".join(sorted(self.allowed_hosts)) or "(none)"
            raise HostNotAllowed(
                f"spec.prometheus.url: host {host!r} is not in the operator's allowlist ({allowed}); "
                "ask the operator's administrator to add it (helm value prometheus.allowedHosts)"
            )

    async def _preflight(self, runtime: PolicyRuntime) -> None:
        refresher = runtime.refresher
        if refresher is None:
            return
        snapshot, engine = await asyncio.gather(refresher.refresh(), refresher.engine())
        runtime.status.preflight = preflight_report(snapshot, self.cache.nodes, engine)
        runtime.status.dirty = True
        refresher.start()

    async def _stop_refresher(self, runtime: PolicyRuntime) -> None:
        if runtime.refresher is not None:
            await runtime.refresher.stop()
            runtime.refresher = None

    async def _stop(self, runtime: PolicyRuntime) -> None:
        if runtime.preflight_task is not None:
            runtime.preflight_task.cancel()
        if runtime.refresher is not None:
            await runtime.refresher.stop()

    async def close(self) -> None:
        for runtime in self.policies.values():
            await self._stop(runtime)

    def _held(self, runtime: PolicyRuntime) -> str:
        """Why the policy must not schedule while kube-scheduler runs (see kube_scheduler_checking);
        "" when it may."""
        if not runtime.claims_default_scheduler or self.kube_scheduler.running is False:
            return ""
        return self.kube_scheduler.reason

    def assign_owners(self) -> None:
        """Each scheduler name is served by its oldest valid policy; younger claimants are in Conflict.
        A held policy serves nothing."""
        owners: dict[str, PolicyRuntime] = {}
        for runtime in sorted(self.policies.values(), key=lambda r: (r.created, r.name)):
            if runtime.policy is None:
                continue
            holder = owners.get(runtime.scheduler_name)
            conflict = holder.name if holder else ""
            held = self._held(runtime)
            if (conflict, held) != (runtime.conflict_with, runtime.held):
                runtime.conflict_with, runtime.held = conflict, held
                self.update_conditions(runtime)
            if holder is None and not held:
                owners[runtime.scheduler_name] = runtime
        self.owners = owners

    def claims_default_scheduler(self) -> bool:
        return any(runtime.claims_default_scheduler for runtime in self.policies.values())

    def update_conditions(self, runtime: PolicyRuntime) -> None:
        runtime.status.set_conditions(policy_conditions(runtime, self.cache.nodes))

    async def flush_statuses(self) -> None:
        """Write every changed policy status (one merge patch per policy)."""
        for runtime in list(self.policies.values()):
            if not runtime.status.dirty:
                continue
            runtime.status.dirty = False
            try:
                await self.sender.send(requests.patch_policy_status(runtime.name, runtime.status.to_status()))
            except ApiError as error:
                if error.status != 404:
                    runtime.status.dirty = True
                    logger.warning("Writing the status of policy %s failed: %s", runtime.name, error)
            except (aiohttp.ClientError, TimeoutError) as error:
                runtime.status.dirty = True
                logger.warning("Writing the status of policy %s failed: %s", runtime.name, error)
