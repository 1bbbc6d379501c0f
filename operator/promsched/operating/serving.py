"""The operator's HTTP endpoints: /metrics, /healthz (liveness) and /readyz (readiness).

Liveness means the scheduling loop runs and no background task keeps failing (see
`scheduling.supervising`): a restart of the pod is what helps then. Readiness means the operator can
serve: it has listed the cluster (its watches are synced) and, if it leads, its scheduling loop runs.
A standby replica is ready: it holds no lease, but would take over. What lies outside the pod, a
Prometheus that is down or slow, is no reason to be unready (a restart would not help, and
`helm upgrade --wait` would hang): it shows in each policy's conditions and in
`promsched_policy_snapshot_age_seconds`.

Gauges that describe the operator's state (leadership, each policy's readiness and snapshot age) are
set from the scheduler on every scrape, so they are as fresh as the scrape.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from promsched.api.statuses import ConditionStatus, ConditionType, find_condition
from promsched.scheduling import telemetry
from promsched.scheduling.policies.runtimes import PolicyRuntime
from promsched.scheduling.schedulers import Scheduler
from promsched.scheduling.supervising import FAILURES_LIMIT, FAILURES_WINDOW_SECONDS

Check = Callable[[], list[str]]


def liveness_problems(loop_alive: Callable[[], bool], failing: Callable[[], list[str]] = list) -> list[str]:
    """What keeps the operator from working; `failing` names the background tasks that keep failing."""
    # Quiet watches are no sign of trouble: kubelets with node leases write an unchanged status only
    # every 5 minutes. A watch that died silently is re-opened by its inactivity timeout instead.
    problems = [] if loop_alive() else ["the scheduling loop is not running"]
    for task in failing():
        problems.append(
            f"the background task {task} failed {FAILURES_LIMIT} times in {FAILURES_WINDOW_SECONDS:.0f}s "
            "(see the log for its errors)"
        )
    return problems


def readiness_problems(scheduler: Scheduler, loop_alive: Callable[[], bool]) -> list[str]:
    problems = []
    if not scheduler.synced.is_set():
        problems.append("the initial list of nodes and pods has not completed")
    if scheduler.leading.is_set() and not loop_alive():
        problems.append("this replica leads but its scheduling loop is not running")
    return problems


def snapshot_age_seconds(runtime: PolicyRuntime, now: float) -> float | None:
    """Seconds since every plugin of the policy last had an answer from Prometheus; a plugin that never
    had one counts from when the policy started refreshing. None for a policy that does not refresh."""
    refresher = runtime.refresher
    if refresher is None:
        return None
    answered = [plugin.refreshed_at for plugin in refresher.latest.plugins.values()]
    oldest = min((runtime.refreshing_since if at is None else at) for at in answered)
    return max(0.0, now - oldest)


def record_state(scheduler: Scheduler, now: float | None = None) -> None:
    """Set the state gauges from `scheduler` as of `now` (default: the time); removed policies' go."""
    now = time.time() if now is None else now
    telemetry.leader.set(1 if scheduler.leading.is_set() else 0)
    for gauge in (telemetry.policy_ready, telemetry.snapshot_age, telemetry.refresh_interval):
        gauge.clear()
    for runtime in scheduler.policies.values():
        ready = find_condition(runtime.status.conditions, ConditionType.READY)
        is_ready = ready is not None and ready.status == ConditionStatus.TRUE
        telemetry.policy_ready.labels(runtime.name).set(1 if is_ready else 0)
        age = snapshot_age_seconds(runtime, now)
        if age is not None and runtime.spec is not None:
            telemetry.snapshot_age.labels(runtime.name).set(age)
            telemetry.refresh_interval.labels(runtime.name).set(runtime.spec.refresh_interval_seconds)


def application(liveness: Check, readiness: Check, before_scrape: Callable[[], None]) -> web.Application:
    async def metrics(_request: web.Request) -> web.Response:
        before_scrape()
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    def probe(check: Check) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_request: web.Request) -> web.Response:
            problems = check()
            if problems:
                return web.Response(status=503, text="\n".join(problems) + "\n")
            return web.Response(text="ok\n")

        return handler

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", probe(liveness))
    app.router.add_get("/readyz", probe(readiness))
    return app
