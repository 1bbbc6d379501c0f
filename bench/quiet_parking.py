"""One scheduler's parked-pods run: pods that fit nowhere (every node carries PARK_TAINT) created and left
parked while the API server's counters are sampled, then room freed for half of them by untainting
`Room.nodes`, until those are bound; and the counters' growth with no scheduler running."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from bench.commanding import Report
from bench.kubeapi import cpu_seconds, read_counts, watch_session
from bench.namespaces import create_namespace, delete_namespace
from bench.pods import CREATE_CONCURRENCY, catch_up, create_pod, follow, pod_manifest
from bench.quiet_runs import Room, Run, Sample, Settings, summarise
from bench.requestcounts import Counts, difference
from bench.scraping import dropped_writes
from bench.variants import Variant, start_variant
from promsched.kube.credentials import Credentials
from promsched.kube.requests import MERGE_PATCH, Request
from promsched.kube.sending import KubeClient, list_all
from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor

PARK_TAINT = {"key": "promsched.io/bench-parked", "value": "true", "effect": "NoSchedule"}


def taint_patch(node: str, parked: bool) -> Request:
    """The node's taints as the sandbox made them: PARK_TAINT alone, or none."""
    body = {"spec": {"taints": [PARK_TAINT] if parked else []}}
    return Request("PATCH", f"/api/v1/nodes/{node}", body, MERGE_PATCH)


def measure_baseline(credentials: Credentials, seconds: float) -> tuple[Counts, float]:
    """The write counters' growth over `seconds` with no scheduler running, and the seconds measured."""

    async def measure() -> tuple[Counts, float]:
        async with watch_session(credentials) as session:
            start, before = time.monotonic(), await read_counts(session)
            await asyncio.sleep(seconds)
            return difference(before, await read_counts(session)), time.monotonic() - start

    return asyncio.run(measure())


async def park_and_free(credentials: Credentials, namespace: str, run: Run, settings: Settings) -> None:
    """Create the pods, leave them parked, free room for half, wait for those to be bound."""
    times = run.times
    enough = asyncio.Event()

    def check_bound() -> None:
        if len(times.bound) >= min(run.room.capacity, run.pods - times.failed_creates):
            enough.set()

    async with (
        KubeClient(credentials, timeout=60, connections=CREATE_CONCURRENCY) as client,
        watch_session(credentials) as session,
    ):

        async def sample(phase: str) -> None:
            counts = await read_counts(session)
            cpu = cpu_seconds(run.scheduler_pid), cpu_seconds(run.apiserver_pid)
            run.samples.append(Sample(time.monotonic(), phase, counts, *cpu))

        async def sample_until(deadline: float, phase: str, done: asyncio.Event | None = None) -> None:
            while time.monotonic() < deadline and not (done and done.is_set()):
                wait = min(settings.sample_seconds, deadline - time.monotonic())
                if done is None:
                    await asyncio.sleep(wait)
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(done.wait(), wait)
                    if not done.is_set() and time.monotonic() - times.last_event > 5.0:
                        await catch_up(client, namespace, times, check_bound)  # a silently stalled watch
                await sample(phase)

        listing = await client.send(Request("GET", f"/api/v1/namespaces/{namespace}/pods"))
        connected = asyncio.Event()
        version = listing["metadata"]["resourceVersion"]
        follower = asyncio.create_task(
            follow(client, session, namespace, version, times, connected, check_bound)
        )
        try:
            await asyncio.wait_for(connected.wait(), 30)
            await sample("start")
            times.started = time.monotonic()
            slots = asyncio.Semaphore(CREATE_CONCURRENCY)
            scheduler = run.variant.scheduler_name
            cpu = f"{run.room.cpu_milli}m"

            async def create(name: str) -> None:
                async with slots:
                    await create_pod(client, pod_manifest(namespace, name, scheduler, cpu), times)

            await asyncio.gather(*(create(f"parked-{i:05d}") for i in range(run.pods)))
            run.created_at = time.monotonic()
            await sample("created")
            await sample_until(run.created_at + 60 * settings.park_minutes, "parked")
            run.events_parked = await list_all(client, f"/api/v1/namespaces/{namespace}/events")
            run.dropped_parked = await asyncio.to_thread(dropped_writes, run.scheduler_metrics_url)
            await sample("park-end")
            run.freed_at = time.monotonic()
            await asyncio.gather(*(client.send(taint_patch(node, parked=False)) for node in run.room.nodes))
            times.last_event = time.monotonic()
            check_bound()
            await sample_until(run.freed_at + settings.free_timeout, "freeing", enough)
            await sample("bound")
            # The writes a scheduler queues behind its bindings (events, conditions) land in this window.
            await sample_until(time.monotonic() + settings.settle_seconds, "settling")
            run.events_end = await list_all(client, f"/api/v1/namespaces/{namespace}/events")
            run.dropped_end = await asyncio.to_thread(dropped_writes, run.scheduler_metrics_url)
            await sample("end")
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await follower


async def retaint(credentials: Credentials, nodes: tuple[str, ...]) -> None:
    async with KubeClient(credentials) as client:
        await asyncio.gather(*(client.send(taint_patch(node, parked=True)) for node in nodes))


def run_scheduler(
    sandbox: Sandbox,
    credentials: Credentials,
    variant: Variant,
    room: Room,
    settings: Settings,
    baseline: Counts,
    report: Report,
) -> dict[str, Any]:
    namespace = f"quiet-{variant.key}"
    wall = time.monotonic()
    asyncio.run(create_namespace(credentials, namespace))
    run = Run(variant, room, settings.pods)
    try:
        run.scheduler_pid, run.scheduler_metrics_url = start_variant(sandbox, variant, report)
        apiserver = Supervisor(sandbox.directory).get("kube-apiserver")
        run.apiserver_pid = apiserver.pid if apiserver else 0
        report(f"  {variant.label}: {settings.pods} pods parked for {settings.park_minutes:g} min")
        asyncio.run(park_and_free(credentials, namespace, run, settings))
    finally:
        Supervisor(sandbox.directory).stop(variant.process)
        asyncio.run(delete_namespace(credentials, namespace))
        asyncio.run(retaint(credentials, room.nodes))
    result = summarise(run, baseline)
    result["wall_s"] = time.monotonic() - wall
    park, freed = result["park"], result["freed"]
    report(
        f"  {variant.label}: {park['scheduling_writes_per_minute']:.0f} scheduling writes/min parked "
        f"({park['net_writes_per_minute']:.0f} all writes/min above baseline), "
        f"{result['events']['objects_parked']} events; freed {freed['bound']}/{room.capacity} bound, "
        f"median {freed['median_s']:.1f} s, max {freed['max_s']:.1f} s, {freed['binds_per_second']:.1f}/s"
    )
    return result
