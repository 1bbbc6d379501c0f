"""The operator's HTTP endpoints: /metrics, /healthz (liveness) and /readyz (readiness).

Liveness means the scheduling loop runs; readiness adds that every running
policy's snapshot is fresh. A standby replica is ready (it holds no lease, but would take over).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from promsched.scheduling.schedulers import Scheduler

Check = Callable[[], list[str]]


def liveness_problems(loop_alive: Callable[[], bool]) -> list[str]:
    # Quiet watches are no sign of trouble: kubelets with node leases write an unchanged status only
    # every 5 minutes. A watch that died silently is re-opened by its inactivity timeout instead.
    return [] if loop_alive() else ["the scheduling loop is not running"]


def readiness_problems(scheduler: Scheduler) -> list[str]:
    problems = []
    if not scheduler.synced.is_set():
        problems.append("the initial list of nodes and pods has not completed")
    if not scheduler.cache.nodes:
        problems.append("no nodes seen yet")
    now = time.time()
    for runtime in scheduler.owners.values():
        refresher = runtime.refresher
        spec = runtime.spec
        if refresher is None or spec is None:
            continue
        age = now - refresher.latest.taken_at
        if age > spec.stale_after_seconds:
            problems.append(f"policy {runtime.name}: metric snapshot is {age:.0f}s old")
    return problems


def application(liveness: Check, readiness: Check) -> web.Application:
    async def metrics(_request: web.Request) -> web.Response:
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
