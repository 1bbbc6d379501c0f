"""The scheduler: cluster events in, bindings, events and policy status out.

It knows nothing of Kopf: the operator feeds it watch events (`on_node`, `on_pod`, `on_policy`) and runs
`run()`. Every policy is one scheduler name; one loop serves them all from one queue. A cycle is
synchronous (filters and a snapshot lookup); bindings and event writes run concurrently with the next
cycles. At most `bind_concurrency` of them are in flight: the loop waits for room before it takes the
next pod, so a burst waits in the queue (one small entry per pod), not as decisions held by bindings.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import aiohttp
import yarl

from promsched.api.annotations import DECISION_ANNOTATION, encode_decision
from promsched.api.policies import (
    ConditionType,
    Decision,
    FilteredCount,
    Mode,
    PolicyError,
    SchedulingPolicy,
    SchedulingPolicySpec,
    parse_status,
)
from promsched.kube import requests
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError
from promsched.metrics.errors import PrometheusError
from promsched.metrics.planning import endpoint_from_policy, plan_from_policy
from promsched.metrics.preflighting import preflight_report
from promsched.metrics.querying import SecretReader
from promsched.metrics.refreshing import Refresher, RefreshObserver
from promsched.metrics.scoring import NodeResult
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling import telemetry
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.deciding import DecisionMemo, Outcome, decide, herd_memory_seconds
from promsched.scheduling.filters import DEFAULT_FILTERS, Filter
from promsched.scheduling.filters.unschedulable import NodeUnschedulable
from promsched.scheduling.intake import RESYNC_INTERVAL, Intake
from promsched.scheduling.kube_scheduler_checking import KubeSchedulerCheck
from promsched.scheduling.pods import DEFAULT_SCHEDULER_NAME, PodInfo
from promsched.scheduling.queues import QueuedPod, SchedulingQueue
from promsched.scheduling.recording import PolicyStatus, condition

logger = logging.getLogger(__name__)

COMPONENT = "promsched"
_CORDON = NodeUnschedulable()
STATUS_WRITE_INTERVAL = 1.0
SHADOWED_KEPT = 10_000
# Bindings (each with its Scheduled event) in flight: each holds a connection to the API server.
BIND_CONCURRENCY = 32
TOP_NODES = 3
# What status.lastDecision.topNodes[].plugins holds: the policy's up to 20 plugins. Placement
# preferences follow them and are left out of the status (not of the annotation) past that.
PLUGINS_SHOWN = 20


class Sender(Protocol):
    async def send(self, request: Request) -> Any: ...


class HostNotAllowed(ValueError):
    """A policy's Prometheus URL is outside the operator's allowlist."""


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
    preflight_task: asyncio.Task[None] | None = field(default=None, repr=False)
    memo: DecisionMemo | None = field(default=None, repr=False)

    def memo_for(self, snapshot: Snapshot) -> DecisionMemo:
        """What decisions on `snapshot` work out once; a new snapshot starts a new memo."""
        if self.memo is None or self.memo.snapshot is not snapshot:
            self.memo = DecisionMemo(snapshot)
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


class _PolicyObserver(RefreshObserver):
    def __init__(self, scheduler: Scheduler, runtime: PolicyRuntime) -> None:
        self.scheduler = scheduler
        self.runtime = runtime
        self.refreshed = False

    def query_finished(self, plugin: str, seconds: float, error: PrometheusError | None) -> None:
        telemetry.query_duration.labels(self.runtime.name, plugin).observe(seconds)
        if error is not None:
            telemetry.query_errors.labels(self.runtime.name, plugin).inc()

    def snapshot_taken(self, snapshot: Snapshot) -> None:
        for plugin in snapshot.plugins:
            age = snapshot.age_seconds(plugin, time.time())
            if age is not None:
                telemetry.metric_age.labels(self.runtime.name, plugin).set(age)
        self.scheduler.update_conditions(self.runtime)
        if not self.refreshed:
            self.refreshed = True
            self.scheduler.queue.move_all_to_active("first metrics of a policy")


def _has_refreshed(snapshot: Snapshot) -> bool:
    """Whether any query of the snapshot's plan has been answered (with samples or an error)."""
    return any(p.refreshed_at is not None or p.error is not None for p in snapshot.plugins.values())


def _chosen_first(outcome: Outcome) -> list[NodeResult]:
    """The ranking with the chosen node first: among equal totals the choice is random."""
    chosen = [r for r in outcome.ranked if r.node == outcome.node]
    return chosen + [r for r in outcome.ranked if r.node != outcome.node]


class Scheduler:
    def __init__(
        self,
        sender: Sender,
        *,
        read_secret: SecretReader | None = None,
        allowed_prometheus_hosts: frozenset[str] | None = None,
        namespaces: frozenset[str] | None = None,
        filters: tuple[Filter, ...] = DEFAULT_FILTERS,
        rng: random.Random | None = None,
        bind_concurrency: int = BIND_CONCURRENCY,
        resync_interval: float = RESYNC_INTERVAL,
    ) -> None:
        self.sender = sender
        self.read_secret = read_secret
        self.allowed_hosts = allowed_prometheus_hosts
        self.namespaces = namespaces  # None: pods of every namespace are scheduled
        self.filters = filters
        self.rng = rng or random.Random()
        self.cache = ClusterCache()
        self.queue = SchedulingQueue()
        self.policies: dict[str, PolicyRuntime] = {}
        self.owners: dict[str, PolicyRuntime] = {}  # scheduler name -> the policy serving it
        self.shadowed: OrderedDict[str, None] = OrderedDict()
        self.leading = asyncio.Event()
        self.leading.set()
        self.kube_scheduler = KubeSchedulerCheck(sender)
        self.intake = Intake(
            sender,
            self.cache,
            self.queue,
            enqueue=self._enqueue,
            refuse=self._refuse_malformed,
            spawn=self._spawn,
            resync_interval=resync_interval,
        )
        self.bind_concurrency = bind_concurrency
        self._binding = 0  # bindings in flight
        self._bind_room = asyncio.Event()
        self._bind_room.set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.next_start = 0  # where the next pod's search over nodes starts (see deciding)

    # ----- intake -------------------------------------------------------------------------------

    # The cluster's objects are the intake's (see intake.py); the operator feeds them through here.

    @property
    def pending(self) -> dict[str, PodInfo]:
        return self.intake.pending

    @property
    def synced(self) -> asyncio.Event:
        return self.intake.synced

    @property
    def unusable_nodes(self) -> dict[str, str]:
        return self.intake.unusable_nodes

    async def sync(self, *, retry: bool = True) -> None:
        await self.intake.sync(retry=retry)

    def on_node(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        self.intake.on_node(event_type, obj)

    def on_pod(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        self.intake.on_pod(event_type, obj)

    def on_namespace(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        self.intake.on_namespace(event_type, obj)

    def on_claim(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        self.intake.on_claim(event_type, obj)

    def on_volume(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        self.intake.on_volume(event_type, obj)

    def on_storage_class(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        self.intake.on_storage_class(event_type, obj)

    def _enqueue(self, pod: PodInfo) -> None:
        runtime = self.owners.get(pod.scheduler_name)
        outside = self.namespaces is not None and pod.namespace not in self.namespaces
        if (
            runtime is None
            or outside
            or pod.scheduling_gated
            or pod.uid in self.shadowed
            or pod.uid in self.cache.assumed
        ):
            self.queue.remove(pod.uid)
            return
        self.queue.add_or_update(pod)

    def _refuse_malformed(self, obj: Mapping[str, Any], message: str) -> None:
        spec = obj.get("spec", {})
        runtime = self.owners.get(spec.get("schedulerName", ""))
        if runtime is None or spec.get("nodeName"):
            return
        self._spawn(self._report_unschedulable(obj.get("metadata", {}), f"invalid pod spec: {message}"))

    async def on_policy(self, event_type: str, obj: Mapping[str, Any]) -> None:
        metadata = obj.get("metadata", {})
        name = metadata.get("name", "")
        if event_type == "DELETED":
            runtime = self.policies.pop(name, None)
            if runtime is not None:
                await self._stop_runtime(runtime)
            self._assign_owners()
            return
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
            return  # a status write (ours) or a metadata change: nothing to apply
        if policy is None:
            runtime.invalid = problem
            runtime.policy = None
            if runtime.refresher is not None:
                await runtime.refresher.stop()
                runtime.refresher = None
        else:
            await self._apply(runtime, policy)
        runtime.status.observed_generation = int(metadata.get("generation", 0))
        if self._claims_default_scheduler(runtime):
            await self.kube_scheduler.check()  # known before the policy may bind a pod
        self._assign_owners()
        self.update_conditions(runtime)
        self._enqueue_pods_of(runtime.scheduler_name)
        self.queue.move_all_to_active("policy changed")

    def _enqueue_pods_of(self, scheduler_name: str) -> None:
        for pod in list(self.pending.values()):
            if pod.scheduler_name == scheduler_name:
                self._enqueue(pod)

    def _claims_default_scheduler(self, runtime: PolicyRuntime) -> bool:
        spec = runtime.spec
        return (
            spec is not None and spec.mode is Mode.ENFORCE and spec.scheduler_name == DEFAULT_SCHEDULER_NAME
        )

    def _held(self, runtime: PolicyRuntime) -> str:
        """Why the policy must not schedule while kube-scheduler runs (see kube_scheduler_checking);
        "" when it may."""
        if not self._claims_default_scheduler(runtime) or self.kube_scheduler.running is False:
            return ""
        return self.kube_scheduler.reason

    def _kube_scheduler_changed(self) -> None:
        self._assign_owners()
        for runtime in self.policies.values():
            if self._claims_default_scheduler(runtime):
                self.update_conditions(runtime)
        self._enqueue_pods_of(DEFAULT_SCHEDULER_NAME)
        self.queue.move_all_to_active("kube-scheduler started or stopped")

    async def _apply(self, runtime: PolicyRuntime, policy: SchedulingPolicy) -> None:
        spec = policy.spec
        runtime.policy = policy
        runtime.status.history = spec.decision_history
        try:
            self._check_allowed(spec.prometheus.url)
            endpoint = await endpoint_from_policy(spec.prometheus, self.read_secret)
        except ValueError as error:
            runtime.invalid = str(error)
            if runtime.refresher is not None:
                await runtime.refresher.stop()
                runtime.refresher = None
            return
        runtime.invalid = ""
        plan = plan_from_policy(spec)
        self.cache.placement_memory = max(self.cache.placement_memory, herd_memory_seconds(plan))
        if runtime.refresher is None:
            runtime.refresher = Refresher(
                plan, endpoint, self.cache.directory, observer=_PolicyObserver(self, runtime)
            )
            runtime.refreshing_since = time.time()
        else:
            await runtime.refresher.update(plan, endpoint)
        if runtime.preflight_task is not None:
            runtime.preflight_task.cancel()
        runtime.preflight_task = self._spawn(self._preflight(runtime))

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
        snapshot = await refresher.refresh()
        runtime.status.preflight = preflight_report(snapshot, self.cache.nodes)
        runtime.status.dirty = True
        refresher.start()

    async def _stop_runtime(self, runtime: PolicyRuntime) -> None:
        if runtime.preflight_task is not None:
            runtime.preflight_task.cancel()
        if runtime.refresher is not None:
            await runtime.refresher.stop()

    def _assign_owners(self) -> None:
        """Each scheduler name is served by its oldest valid policy; younger claimants are in Conflict.
        A held policy (see `_held`) serves nothing."""
        owners: dict[str, PolicyRuntime] = {}
        for runtime in sorted(self.policies.values(), key=lambda r: (r.created, r.name)):
            if runtime.policy is None:
                continue
            holder = owners.get(runtime.scheduler_name)
            conflict = holder.name if holder else ""
            if conflict != runtime.conflict_with:
                runtime.conflict_with = conflict
                self.update_conditions(runtime)
            if holder is None and not self._held(runtime):
                owners[runtime.scheduler_name] = runtime
        self.owners = owners

    def update_conditions(self, runtime: PolicyRuntime) -> None:
        generation = runtime.generation or None
        holder = runtime.conflict_with
        held = self._held(runtime)
        conflict = condition(
            ConditionType.CONFLICT,
            bool(holder or held),
            "SchedulerNameTaken" if holder else "KubeSchedulerRunning" if held else "NoConflict",
            f"schedulerName {runtime.scheduler_name!r} is served by the older policy {holder!r}"
            if holder
            else held[:2000],
            generation,
        )
        conditions = [conflict]
        reachable_ok, reachable_reason, reachable_message = False, "Pending", "no refresh yet"
        complete_ok, complete_reason, complete_message = False, "Pending", "no refresh yet"
        if runtime.refresher is not None and runtime.refresher.latest.plugins:
            snapshot = runtime.refresher.latest
            if any(p.refreshed_at is not None or p.error is not None for p in snapshot.plugins.values()):
                errors = snapshot.errors
                reachable_ok = not errors
                reachable_reason = "QueriesSucceeded" if reachable_ok else "QueryFailed"
                reachable_message = "; ".join(f"{plugin}: {error}" for plugin, error in errors.items())[:2000]
                gaps = []
                for plugin, plugin_snapshot in snapshot.plugins.items():
                    missing = [node for node in self.cache.nodes if node not in plugin_snapshot.samples]
                    if missing:
                        gaps.append(
                            f"{plugin}: {len(missing)} node(s) without series ({', '.join(missing[:5])})"
                        )
                complete_ok = not gaps
                complete_reason = "AllNodesHaveSeries" if complete_ok else "SeriesMissing"
                complete_message = "; ".join(gaps)[:2000]
        conditions.append(
            condition(
                ConditionType.PROMETHEUS_REACHABLE,
                reachable_ok,
                reachable_reason,
                reachable_message,
                generation,
            )
        )
        conditions.append(
            condition(
                ConditionType.METRICS_COMPLETE, complete_ok, complete_reason, complete_message, generation
            )
        )
        if runtime.invalid:
            ready = condition(ConditionType.READY, False, "InvalidPolicy", runtime.invalid[:2000], generation)
        elif runtime.conflict_with or held:
            ready = condition(ConditionType.READY, False, "Conflict", conflict.message, generation)
        elif not reachable_ok:
            ready = condition(
                ConditionType.READY,
                False,
                "PrometheusUnavailable",
                f"scheduling with missing metrics as spec.onMissingMetrics says: {reachable_message}",
                generation,
            )
        else:
            ready = condition(ConditionType.READY, True, "Scheduling", "", generation)
        runtime.status.set_conditions([ready, *conditions])

    # ----- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule until cancelled; status writes are flushed alongside."""
        flusher = asyncio.create_task(self._flush_statuses(), name="promsched-status-writer")
        checker = asyncio.create_task(
            self.kube_scheduler.run(
                lambda: any(map(self._claims_default_scheduler, self.policies.values())),
                self._kube_scheduler_changed,
            ),
            name="promsched-kube-scheduler-check",
        )
        try:
            await self.intake.start()
            while True:
                await self.leading.wait()
                await self._bind_room.wait()
                entry = await self.queue.pop()
                if not self.leading.is_set():
                    self.queue.backoff(entry.pod.uid)
                    continue
                try:
                    self.schedule_one(entry)
                except Exception:
                    self._cycle_failed(entry)
                # Let watch events and bindings run between cycles.
                await asyncio.sleep(0)
        finally:
            flusher.cancel()
            checker.cancel()
            await self.close()

    def _cycle_failed(self, entry: QueuedPod) -> None:
        """A bug in one pod's cycle must not stop scheduling: log it, count it, retry the pod later."""
        pod = entry.pod
        logger.exception("Scheduling %s failed unexpectedly; it is retried after its backoff", pod.key)
        runtime = self.owners.get(pod.scheduler_name)
        telemetry.schedule_attempts.labels("error", runtime.name if runtime else "").inc()
        if pod.uid in self.cache.assumed or pod.uid not in self.pending:
            return  # its binding is under way, or it is gone
        if pod.uid in self.queue.entries:
            self.queue.backoff(pod.uid)
        else:
            self.queue.requeue(self.pending[pod.uid], entry.added_at, entry.attempts + 1)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        for runtime in self.policies.values():
            await self._stop_runtime(runtime)

    def _spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("Background work failed", exc_info=task.exception())

    def schedule_one(self, entry: QueuedPod) -> Outcome | None:
        pod = entry.pod
        runtime = self.owners.get(pod.scheduler_name)
        if runtime is None or runtime.policy is None or pod.uid not in self.pending:
            self.queue.remove(pod.uid)
            return None
        if runtime.refresher is None:
            # The policy cannot read metrics (e.g. its Prometheus is not allowed); it must not place pods.
            self._unschedulable(
                entry, runtime, None, f"policy {runtime.name} is not ready: {runtime.invalid}"
            )
            return None
        if not _has_refreshed(runtime.refresher.latest):
            # Before its first refresh a policy knows no load: every node would score alike. Wait
            # (silently: nothing is wrong) until the first snapshot moves the pod back.
            self.queue.unschedulable(pod.uid)
            return None
        if pod.unsupported:
            message = "; ".join(f"{item} is not supported by promsched yet" for item in pod.unsupported)
            self._unschedulable(entry, runtime, None, message)
            return None
        started = time.perf_counter()
        snapshot = runtime.refresher.latest
        outcome = decide(
            pod,
            self.cache,
            snapshot,
            memo=runtime.memo_for(snapshot),
            start=self.next_start,
            filters=self.filters,
            rng=self.rng,
            preference_weight=runtime.policy.spec.placement_preferences.weight,
        )
        self.next_start = outcome.next_start
        telemetry.attempt_duration.labels(runtime.name).observe(time.perf_counter() - started)
        decision = self._decision(entry, runtime, outcome)
        if runtime.policy.spec.mode is Mode.SHADOW:
            self.queue.done(pod.uid)
            self.shadowed[pod.uid] = None
            while len(self.shadowed) > SHADOWED_KEPT:
                self.shadowed.popitem(last=False)
            if outcome.node is None:
                runtime.status.record_unschedulable(pod.uid, outcome.message, decision)
            else:
                runtime.status.record_scheduled(pod.uid, decision)
            return outcome
        if outcome.node is None:
            self._unschedulable(entry, runtime, decision, outcome.message)
            return outcome
        self.cache.assume(pod, outcome.node)
        self.queue.done(pod.uid)
        self._binding += 1
        if self._binding >= self.bind_concurrency:
            self._bind_room.clear()
        annotation = encode_decision(outcome.node, outcome.ranked[:TOP_NODES])
        self._spawn(self._bind(entry, runtime, decision, outcome.node, annotation))
        return outcome

    def _decision(self, entry: QueuedPod, runtime: PolicyRuntime, outcome: Outcome) -> Decision:
        policy = runtime.policy
        assert policy is not None
        filtered = sorted(outcome.filtered.items(), key=lambda item: -item[1])[:32]
        return Decision(
            pod=entry.pod.key,
            node=outcome.node,
            time=datetime.now(UTC),
            latency_ms=max(0.0, (self.queue.clock() - entry.added_at) * 1000.0),
            generation=policy.generation,
            mode=policy.spec.mode,
            top_nodes=[
                replace(result, plugins=result.plugins[:PLUGINS_SHOWN]).to_api()
                for result in _chosen_first(outcome)[:TOP_NODES]
            ],
            filtered=[FilteredCount(reason=reason[:1024], count=count) for reason, count in filtered],
        )

    def _unschedulable(
        self, entry: QueuedPod, runtime: PolicyRuntime, decision: Decision | None, message: str
    ) -> None:
        self.queue.unschedulable(entry.pod.uid)
        telemetry.schedule_attempts.labels("unschedulable", runtime.name).inc()
        runtime.status.record_unschedulable(entry.pod.uid, message, decision)
        pod = entry.pod
        self._spawn(
            self._report_unschedulable(
                {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}, message
            )
        )

    async def _report_unschedulable(self, metadata: Mapping[str, Any], message: str) -> None:
        namespace, name = metadata.get("namespace", "default"), metadata.get("name", "")
        regarding = {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": namespace,
            "name": name,
            "uid": metadata.get("uid", ""),
        }
        pod_condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": requests.now_rfc3339(),
        }
        await self._send_quietly(requests.patch_pod_condition(namespace, name, pod_condition))
        await self._send_quietly(
            requests.create_event(regarding, "Warning", "FailedScheduling", message, COMPONENT)
        )

    async def _send_quietly(self, request: Request) -> None:
        """Events and conditions inform; losing one must not fail scheduling."""
        try:
            await self.sender.send(request)
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            logger.warning("%s %s failed: %s", request.method, request.path, error)

    async def _bind(
        self, entry: QueuedPod, runtime: PolicyRuntime, decision: Decision, node: str, annotation: str
    ) -> None:
        try:
            await self._send_binding(entry, runtime, decision, node, annotation)
        finally:
            self._binding -= 1
            if self._binding < self.bind_concurrency:
                self._bind_room.set()

    async def _send_binding(
        self, entry: QueuedPod, runtime: PolicyRuntime, decision: Decision, node: str, annotation: str
    ) -> None:
        pod = entry.pod
        # The node may have gone or been cordoned since the decision (the cycle does not wait on the
        # network, but events run in between).
        target = self.cache.nodes.get(node)
        if target is None or _CORDON.filter(pod, target, self.cache.usage_of(node)) is not None:
            self.cache.forget(pod.uid)
            self._bind_failed(entry, runtime, f"node {node} was deleted or cordoned before binding")
            return
        started = time.perf_counter()
        try:
            await self.sender.send(
                requests.bind_pod(pod.namespace, pod.name, pod.uid, node, {DECISION_ANNOTATION: annotation})
            )
        except ApiError as error:
            telemetry.bind_duration.labels("error").observe(time.perf_counter() - started)
            self.cache.forget(pod.uid)
            if error.status in (404, 409):
                # Deleted, recreated under the same name, or bound by someone else: not ours to retry.
                logger.info("Binding %s to %s dropped: %s", pod.key, node, error)
                return
            self._bind_failed(entry, runtime, f"Binding rejected: {error}")
            return
        except (aiohttp.ClientError, TimeoutError) as error:
            telemetry.bind_duration.labels("error").observe(time.perf_counter() - started)
            self.cache.forget(pod.uid)
            self._bind_failed(entry, runtime, f"Binding failed: {error}")
            return
        telemetry.bind_duration.labels("bound").observe(time.perf_counter() - started)
        telemetry.schedule_attempts.labels("scheduled", runtime.name).inc()
        telemetry.e2e_latency.labels(runtime.name).observe(max(0.0, self.queue.clock() - entry.added_at))
        telemetry.decisions_per_node.labels(node).inc()
        runtime.status.record_scheduled(pod.uid, decision)
        regarding = {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
        }
        await self._send_quietly(
            requests.create_event(
                regarding, "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node}", COMPONENT
            )
        )

    def _bind_failed(self, entry: QueuedPod, runtime: PolicyRuntime, message: str) -> None:
        logger.warning("%s: %s", entry.pod.key, message)
        telemetry.schedule_attempts.labels("error", runtime.name).inc()
        runtime.status.record_error()
        if entry.pod.uid in self.pending:
            self.queue.requeue(self.pending[entry.pod.uid], entry.added_at, entry.attempts)

    async def _flush_statuses(self) -> None:
        while True:
            await asyncio.sleep(STATUS_WRITE_INTERVAL)
            # Counted here, once a second: counting per cycle would cost O(queue) for every pod.
            for sub_queue, count in self.queue.counts().items():
                telemetry.pending_pods.labels(sub_queue).set(count)
            await self.flush_statuses()

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
