"""The scheduler: cluster events in, bindings, events and policy status out.

It knows nothing of Kopf: the operator feeds the intake its watch events (`intake.on_event`), the
scheduler the policies' (`on_policy`), and runs `run()`. Its jobs are split along kube-scheduler's
seams: the intake feeds the cluster cache and the queue (`intake`), the policies' runtimes hold what
each SchedulingPolicy needs (`runtimes`), the binder binds (`binding`), the reporter tells pods why they
wait (`reporting`); the loop and the cycle are here.
Every policy is one scheduler name; one loop serves them all from one queue. A cycle is synchronous
(filters and a snapshot lookup); bindings and writes run concurrently with the next cycles.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Mapping
from typing import Any

from promsched.api.annotations import encode_decision
from promsched.api.fields import Mode
from promsched.kube.reflecting import SupportsWatch
from promsched.kube.sending import SupportsSend
from promsched.metrics.querying import SecretReader
from promsched.metrics.refreshing import Refresher
from promsched.scheduling import telemetry
from promsched.scheduling.binding.binding_pods import BIND_CONCURRENCY, Assumed, Binder
from promsched.scheduling.binding.evicting import Evictor
from promsched.scheduling.binding.prebinding import BIND_TIMEOUT_SECONDS
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import Outcome, decide
from promsched.scheduling.cycle.preempting import nominated_node
from promsched.scheduling.filters import DEFAULT_FILTERS
from promsched.scheduling.filters.volume_binding import plan_for
from promsched.scheduling.framework import ClusterEvent, Filter
from promsched.scheduling.intake.following import RESYNC_INTERVAL, Intake
from promsched.scheduling.loop_lag_watching import Refreshes, watch_loop_lag
from promsched.scheduling.objects.pods import DEFAULT_SCHEDULER_NAME, PodInfo
from promsched.scheduling.policies.decisions import TOP_NODES, decision_record
from promsched.scheduling.policies.kube_scheduler_checking import KubeSchedulerCheck
from promsched.scheduling.policies.recording import LazyDecision
from promsched.scheduling.policies.runtimes import (
    PolicyRuntime,
    PolicyRuntimes,
    RefresherFactory,
    has_refreshed,
)
from promsched.scheduling.queues import MAX_UNSCHEDULABLE_SECONDS, QueuedPod, SchedulingQueue
from promsched.scheduling.rebalance.rebalancing import Rebalancer
from promsched.scheduling.reporting.reporting_pods import PodReporter
from promsched.scheduling.supervising import Supervisor

logger = logging.getLogger(__name__)

STATUS_WRITE_INTERVAL = 1.0
# kube writes event series' counts every 30 minutes, and finishes those idle for 6 minutes every 6
# minutes (client-go tools/events).
EVENT_REFRESH_INTERVAL = 30 * 60.0
EVENT_FINISH_INTERVAL = 6 * 60.0
# How long closing waits for the event series' final counts to be written (a pod's termination grace
# period is 30 s by default).
EVENT_FLUSH_SECONDS = 5.0


class Scheduler:
    def __init__(
        self,
        sender: SupportsSend,
        *,
        read_secret: SecretReader | None = None,
        allowed_prometheus_hosts: frozenset[str] | None = None,
        namespaces: frozenset[str] | None = None,
        filters: tuple[Filter, ...] = DEFAULT_FILTERS,
        rng: random.Random | None = None,
        bind_concurrency: int = BIND_CONCURRENCY,
        resync_interval: float = RESYNC_INTERVAL,
        refresher_factory: RefresherFactory = Refresher,
        max_unschedulable_seconds: float = MAX_UNSCHEDULABLE_SECONDS,
        rebalance_evictions: bool = True,
        bind_timeout: float = BIND_TIMEOUT_SECONDS,
        watcher: SupportsWatch | None = None,
        watch_inactivity_timeout: float = 70.0,
        supervisor: Supervisor | None = None,
    ) -> None:
        self.sender = sender
        # Runs the long-lived tasks, the operator's too; `_spawn` the short ones (a binding, a list).
        self.supervisor = supervisor or Supervisor()
        self.namespaces = namespaces  # None: pods of every namespace are scheduled
        self.filters = filters
        self.rng = rng or random.Random()
        self.cache = ClusterCache()
        self.queue = SchedulingQueue(max_unschedulable_seconds=max_unschedulable_seconds)
        self.leading = asyncio.Event()
        self.leading.set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.next_start = 0  # where the next pod's search over nodes starts (see deciding)
        self.refreshes = Refreshes()
        self.runtimes = PolicyRuntimes(
            sender,
            self.cache,
            spawn=self._spawn,
            on_snapshot=self._snapshot_taken,
            read_secret=read_secret,
            allowed_hosts=allowed_prometheus_hosts,
            refresher_factory=refresher_factory,
            run_task=self.supervisor.start,  # each policy's refresh loop is a supervised task
            namespaces=namespaces,
            refreshes=self.refreshes,
        )
        self.intake = Intake(
            sender,
            self.cache,
            self.queue,
            schedules=self.runtimes.schedules,
            refuse=self._refuse_malformed,
            spawn=self._spawn,
            resync_interval=resync_interval,
            watcher=watcher,
            watch_inactivity_timeout=watch_inactivity_timeout,
        )
        self.reporter = PodReporter(sender, self.intake.pending, spawn=self._spawn)
        self.binder = Binder(
            sender,
            self.cache,
            self.intake,
            self.reporter,
            spawn=self._spawn,
            concurrency=bind_concurrency,
            bind_timeout=bind_timeout,
            clock=self.queue.clock,
        )
        self.evictor = Evictor(
            sender, self.cache, self.queue, spawn=self._spawn, report_preempted=self.reporter.report_preempted
        )
        self.rebalancer = Rebalancer(
            sender,
            self.cache,
            self.runtimes,
            self.leading,
            self.reporter.report_rebalanced,
            evictions_allowed=rebalance_evictions,
            namespaces=namespaces,
            filters=filters,
        )

    # ----- intake -------------------------------------------------------------------------------

    # The cluster's objects are the intake's (see intake/following.py); the operator feeds it directly.

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

    def _refuse_malformed(self, obj: Mapping[str, Any], message: str) -> None:
        spec = obj.get("spec", {})
        scheduler_name = spec.get("schedulerName", "")
        if scheduler_name not in self.owners or spec.get("nodeName"):
            return
        self.reporter.report_malformed(
            obj.get("metadata", {}), f"invalid pod spec: {message}", scheduler_name
        )

    # ----- policies -----------------------------------------------------------------------------

    @property
    def policies(self) -> dict[str, PolicyRuntime]:
        return self.runtimes.policies

    @property
    def owners(self) -> dict[str, PolicyRuntime]:
        return self.runtimes.owners

    @property
    def kube_scheduler(self) -> KubeSchedulerCheck:
        return self.runtimes.kube_scheduler

    def update_conditions(self, runtime: PolicyRuntime) -> None:
        self.runtimes.update_conditions(runtime)

    async def on_policy(self, event_type: str, obj: Mapping[str, Any]) -> None:
        changed = await self.runtimes.on_policy(event_type, obj)
        if changed is not None:
            self.intake.reconsider(changed.scheduler_name)
            self.queue.move_all_to_active("policy changed")

    def _kube_scheduler_changed(self) -> None:
        self.runtimes.assign_owners()
        for runtime in self.policies.values():
            if runtime.claims_default_scheduler:
                self.update_conditions(runtime)
        self.intake.reconsider(DEFAULT_SCHEDULER_NAME)
        self.queue.move_all_to_active("kube-scheduler started or stopped")

    def _snapshot_taken(self, *, first: bool) -> None:
        if first:
            self.queue.move_all_to_active("first metrics of a policy")
        else:
            # Load thresholds judge the nodes anew: the pods they kept out may fit now.
            self.queue.move_all_to_active("metrics refreshed", ClusterEvent.METRICS_REFRESHED)

    async def flush_statuses(self) -> None:
        """Write every changed policy status (one merge patch per policy)."""
        await self.runtimes.flush_statuses()

    async def _write_statuses(self) -> None:
        refreshed_events = finished_events = time.monotonic()
        while True:
            await asyncio.sleep(STATUS_WRITE_INTERVAL)
            # Counted here, once a second: counting per cycle would cost O(queue) for every pod.
            for sub_queue, count in self.queue.counts().items():
                telemetry.pending_pods.labels(sub_queue).set(count)
            self._forget_gone_pods()
            await self.flush_statuses()
            now = time.monotonic()
            if now - finished_events >= EVENT_FINISH_INTERVAL:
                finished_events = now
                self.reporter.finish_events()
            if now - refreshed_events >= EVENT_REFRESH_INTERVAL:
                refreshed_events = now
                self.reporter.refresh_events()

    def _forget_gone_pods(self) -> None:
        """Pods no longer waiting (bound by anyone, deleted) fail no more in the policies' status."""
        pending = self.pending
        for runtime in self.policies.values():
            for uid in [uid for uid in runtime.status.failing if uid not in pending]:
                runtime.status.forget(uid)
                self.reporter.forget(uid)

    # ----- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule until cancelled, with status writes, the kube-scheduler check and the rebalancer
        alongside, each a supervised task (see `supervising`), stopped when it ends. It may run again
        (`close` ends the rest)."""
        started = [
            self.supervisor.start("status-writer", self._write_statuses),
            self.supervisor.start("kube-scheduler-check", self._check_kube_scheduler),
            self.supervisor.start("rebalancer", self.rebalancer.run),
            self.supervisor.start("loop-lag-watch", lambda: watch_loop_lag(refreshes=self.refreshes)),
        ]
        try:
            await self.intake.start(self.supervisor.start)
            started.append(self.supervisor.start("scheduling-loop", self._schedule))
            await started[-1]
        finally:
            for task in started:
                task.cancel()
            await asyncio.wait(started)

    async def _check_kube_scheduler(self) -> None:
        await self.kube_scheduler.run(self.runtimes.claims_default_scheduler, self._kube_scheduler_changed)

    async def _schedule(self) -> None:
        while True:
            await self.leading.wait()
            await self.binder.room.wait()
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
        """Write the event series' final counts (waiting up to EVENT_FLUSH_SECONDS), then stop the
        background work and the policies' refreshes."""
        try:
            async with asyncio.timeout(EVENT_FLUSH_SECONDS):
                await self.reporter.close()
        except TimeoutError:
            logger.warning(
                "%d event and condition writes were not sent before closing", len(self.reporter.writes)
            )
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        await self.runtimes.close()

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
            message = f"policy {runtime.name} is not ready: {runtime.invalid}"
            self._unschedulable(entry, runtime, None, message, ClusterEvent.POLICY_CHANGED)
            return None
        if not has_refreshed(runtime.refresher.latest):
            # Before its first refresh a policy knows no load: every node would score alike. Wait
            # (silently: nothing is wrong) until the first snapshot moves the pod back.
            self.queue.unschedulable(pod.uid, ClusterEvent.METRICS_REFRESHED)
            return None
        if pod.unsupported:
            message = "; ".join(f"{item} is not supported by promsched yet" for item in pod.unsupported)
            # Only a change of the pod itself (which requeues it) can lift this.
            self._unschedulable(entry, runtime, None, message, ClusterEvent.NONE)
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
            evictable=self._evictable,
        )
        self.next_start = outcome.next_start
        if outcome.node is None and outcome.total_nodes:
            telemetry.preemption_attempts.inc()  # kube counts every PostFilter run
        telemetry.attempt_duration.labels(runtime.name).observe(time.perf_counter() - started)
        decision = decision_record(entry, runtime, outcome, self.cache, self.queue.clock())
        if runtime.policy.spec.mode is Mode.SHADOW:
            self.queue.done(pod.uid)
            self.runtimes.shadow(pod.uid)
            if outcome.node is None:
                runtime.status.record_unschedulable(pod.uid, outcome.message, decision)
            else:
                runtime.status.record_scheduled(pod.uid, decision)
            return outcome
        if outcome.node is None:
            preemption = outcome.preemption
            if preemption.candidate is not None:
                self.evictor.preempt(pod, preemption.candidate, runtime.scheduler_name)
            elif preemption.clear_nomination and nominated_node(pod, self.cache):
                self.evictor.clear_nomination(pod)
            self._unschedulable(entry, runtime, decision, outcome.message, outcome.lifted_by)
            return outcome
        # The claims' volumes to bind or provision there (kube's VolumeBinding Reserve).
        volumes = plan_for(pod, self.cache, self.cache.nodes[outcome.node])
        self.cache.assume(pod, outcome.node)
        self.queue.done(pod.uid)
        annotation = encode_decision(outcome.node, outcome.ranked[:TOP_NODES], decision.estimate)
        self.binder.bind(Assumed(entry, runtime, decision, outcome.node, annotation, volumes))
        return outcome

    def _evictable(self, victim: PodInfo) -> bool:
        """Preemption evicts only where promsched may write (with `namespaces`, its RBAC is theirs)."""
        return self.namespaces is None or victim.namespace in self.namespaces

    def _unschedulable(
        self,
        entry: QueuedPod,
        runtime: PolicyRuntime,
        decision: LazyDecision | None,
        message: str,
        lifted_by: ClusterEvent,
    ) -> None:
        self.queue.unschedulable(entry.pod.uid, lifted_by)
        telemetry.schedule_attempts.labels("unschedulable", runtime.name).inc()
        runtime.status.record_unschedulable(entry.pod.uid, message, decision)
        self.reporter.report_unschedulable(entry.pod, message, runtime.scheduler_name)
