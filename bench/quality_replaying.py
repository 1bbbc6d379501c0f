"""Replaying a trace (`bench.quality_trace`) in real time: each workload a ReplicaSet created, scaled and
deleted when the trace says, while a watch records the pods' lives (`bench.quality_measures.PodLives`)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp

from bench.commanding import report_line
from bench.kubeapi import watch, watch_session
from bench.pods import POD_IMAGE
from bench.quality_measures import PodLives
from bench.quality_trace import USAGE_ANNOTATION, Trace, Workload
from promsched.kube.credentials import Credentials
from promsched.kube.requests import MERGE_PATCH, Request
from promsched.kube.sending import ApiError, KubeClient
from promsched.sandbox.builds.reporting import CountProgress


def pod_template(workload: Workload, scheduler_name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "labels": {"app": workload.name, "promsched.io/bench-kind": workload.kind},
            "annotations": {USAGE_ANNOTATION: workload.usage.annotation()},
        },
        "spec": {
            "schedulerName": scheduler_name,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": POD_IMAGE,
                    "resources": {
                        "requests": {
                            "cpu": f"{workload.cpu_request_milli}m",
                            "memory": str(workload.memory_request_bytes),
                        }
                    },
                }
            ],
        },
    }


def workload_object(workload: Workload, namespace: str, scheduler_name: str, replicas: int) -> dict[str, Any]:
    """A workload as a ReplicaSet: the controller-manager creates its pods, which carry the controller
    ownerReference that makes them siblings. A batch job too: kwok's pod stages complete a Job's pods
    within a second of running, so a job is a ReplicaSet the trace deletes when the job ends."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": workload.name,
            "namespace": namespace,
            "labels": {"app": workload.name, "promsched.io/bench-kind": workload.kind},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": workload.name}},
            "template": pod_template(workload, scheduler_name),
        },
    }


async def _act(client: KubeClient, request: Request, errors: list[str]) -> None:
    try:
        await client.send(request)
    except (ApiError, OSError, TimeoutError) as error:
        errors.append(f"{request.method} {request.path}: {error}"[:300])


async def _follow(
    session: aiohttp.ClientSession, client: KubeClient, namespace: str, lives: PodLives
) -> None:
    """Watch the namespace's pods into `lives`; after a broken watch, catch up from a listing (pods gone
    from it are taken as deleted then)."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    version = ""
    while True:
        listing = await client.send(Request("GET", path))
        now = time.time()
        present = set()
        for pod in listing["items"]:
            present.add(pod["metadata"]["name"])
            lives.observe("ADDED", pod, now)
        for name in set(lives.first_seen) - present - set(lives.gone):
            lives.gone[name] = now
        version = listing["metadata"]["resourceVersion"]
        with contextlib.suppress(RuntimeError, aiohttp.ClientError, TimeoutError, ValueError):
            async for kind, pod in watch(session, path, {"resourceVersion": version}):
                lives.observe(kind, pod, time.time())
        await asyncio.sleep(0.5)


async def _interrupt(delay: float, interruption: Callable[[], None]) -> None:
    await asyncio.sleep(max(0.0, delay))
    await asyncio.to_thread(interruption)


async def replay(
    credentials: Credentials,
    namespace: str,
    trace: Trace,
    scheduler_name: str,
    interruptions: Sequence[tuple[float, Callable[[], None]]] = (),
) -> dict[str, Any]:
    """Replay the trace in real time, and run each of `interruptions` (seconds into the trace, a blocking
    call such as stopping Prometheus) in a thread at its time; returns the window (Unix seconds), the
    pods' lives and any failed requests."""
    lives = PodLives()
    errors: list[str] = []
    by_name = {workload.name: workload for workload in trace.workloads}
    async with KubeClient(credentials, timeout=60) as client, watch_session(credentials) as session:
        follower = asyncio.create_task(_follow(session, client, namespace, lives))
        loop = asyncio.get_running_loop()
        origin, start = loop.time(), time.time()
        actions = [
            asyncio.create_task(_interrupt(origin + at_s - loop.time(), interruption))
            for at_s, interruption in interruptions
        ]
        seconds = math.ceil(trace.duration_s)
        with CountProgress("seconds of the trace replayed", seconds, report_line) as progress:
            for event in trace.events:
                delay = origin + event.at_s - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                progress.update(int(loop.time() - origin))
                workload = by_name[event.workload]
                collection = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
                if event.action == "create":
                    body = workload_object(workload, namespace, scheduler_name, event.replicas)
                    request = Request("POST", collection, body)
                elif event.action == "scale":
                    body = {"spec": {"replicas": event.replicas}}
                    request = Request("PATCH", f"{collection}/{workload.name}", body, MERGE_PATCH)
                else:
                    params = {"propagationPolicy": "Background"}
                    request = Request("DELETE", f"{collection}/{workload.name}", params=params)
                actions.append(asyncio.create_task(_act(client, request, errors)))
            await asyncio.sleep(max(0.0, origin + trace.duration_s - loop.time()))
            progress.update(seconds)
        end = time.time()
        await asyncio.gather(*actions)
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await follower
    return {"start": start, "end": end, "lives": lives, "errors": errors}
