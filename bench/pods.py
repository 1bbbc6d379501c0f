"""The benches' pods: their manifest, creating them under load, and when each was created and bound, as
the benches' own watch saw it (catching up from a listing when the watch breaks)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.kubeapi import watch
from bench.requestcounts import Counts
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError, KubeClient
from promsched.sandbox.launching import ZONE_LABEL
from promsched.scheduling.scores.topology_spread import HOSTNAME

POD_CPU = "100m"
POD_MEMORY = "128Mi"
POD_IMAGE = "registry.k8s.io/pause:3.10"
CREATE_CONCURRENCY = 64


@dataclass
class PodTimes:
    created: dict[str, float] = field(default_factory=dict)
    first_seen: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)  # first seen Running, as kwok reports it
    node: dict[str, str] = field(default_factory=dict)
    failed_creates: int = 0
    started: float = 0.0
    last_event: float = 0.0
    watch_restarts: list[str] = field(default_factory=list)
    late_binds: int = 0  # bindings found by a listing after the watch missed them: timed late
    requests: Counts = field(default_factory=dict)  # the API server's requests over the run, by kind
    request_seconds: Counts = field(default_factory=dict)  # the seconds it spent serving them

    def latencies(self) -> list[float]:
        """Seconds from creation to binding: creation is when the POST returned or the watch first saw the
        pod, whichever came first; binding is when the watch first saw spec.nodeName."""
        values = []
        for name, bound in self.bound.items():
            created = min(self.created.get(name, math.inf), self.first_seen.get(name, math.inf))
            if math.isfinite(created):
                values.append(max(0.0, bound - created))
        return sorted(values)


POD_LABELS: dict[str, str] = {"app": "promsched-bench"}
_THE_BENCH_PODS = {"matchLabels": POD_LABELS}
# Pod shapes by name: what each adds to the benchmark pod's spec ("spec") and container ("container"),
# its rules selecting the benchmark's pods. "plain" is what `make bench` runs.
SHAPES: dict[str, dict[str, dict[str, Any]]] = {
    "plain": {},
    "spread-zone": {
        "spec": {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE_LABEL,
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": _THE_BENCH_PODS,
                }
            ]
        }
    },
    "spread-hostname": {
        "spec": {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": HOSTNAME,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": _THE_BENCH_PODS,
                }
            ]
        }
    },
    "anti-affinity-preferred": {
        "spec": {
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "topologyKey": HOSTNAME,
                                "labelSelector": _THE_BENCH_PODS,
                            },
                        }
                    ]
                }
            }
        }
    },
    "anti-affinity-required": {
        "spec": {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": HOSTNAME, "labelSelector": _THE_BENCH_PODS}
                    ]
                }
            }
        }
    },
    "host-port": {"container": {"ports": [{"containerPort": 80, "hostPort": 8080}]}},
}


def pod_manifest(
    namespace: str, name: str, scheduler_name: str, cpu: str = POD_CPU, shape: str = "plain"
) -> dict[str, Any]:
    extra = SHAPES[shape]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(POD_LABELS)},
        "spec": {
            "schedulerName": scheduler_name,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "pause",
                    "image": POD_IMAGE,
                    "resources": {"requests": {"cpu": cpu, "memory": POD_MEMORY}},
                    **extra.get("container", {}),
                }
            ],
            **extra.get("spec", {}),
        },
    }


def _observe(pod: dict[str, Any], times: PodTimes, done: Callable[[], None]) -> bool:
    """Record when the pod was first seen, first seen bound and first seen Running (`done` is called
    after either of the last two); True when this found its binding."""
    now = time.monotonic()
    times.last_event = now
    name = pod["metadata"]["name"]
    times.first_seen.setdefault(name, now)
    node = pod["spec"].get("nodeName")
    found_binding = bool(node) and name not in times.bound
    if found_binding:
        times.bound[name] = now
        times.node[name] = node
    started = (pod.get("status") or {}).get("phase") == "Running" and name not in times.running
    if started:
        times.running[name] = now
    if found_binding or started:
        done()
    return found_binding


async def catch_up(client: KubeClient, namespace: str, times: PodTimes, done: Callable[[], None]) -> str:
    """List the namespace's pods and record what the watch missed: bindings found so are timed now, later
    than they happened. Returns the listing's resourceVersion."""
    listing = await client.send(Request("GET", f"/api/v1/namespaces/{namespace}/pods"))
    for pod in listing["items"]:
        if _observe(pod, times, done):
            times.late_binds += 1
    version: str = listing["metadata"]["resourceVersion"]
    return version


async def follow(
    client: KubeClient,
    session: Any,
    namespace: str,
    version: str,
    times: PodTimes,
    connected: asyncio.Event,
    done: Callable[[], None],
) -> None:
    """Watch the namespace's pods; when the watch fails or ends, catch up from a listing and watch again."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    while True:
        try:
            async for kind, pod in watch(session, path, {"resourceVersion": version}, connected):
                version = pod["metadata"].get("resourceVersion", version)
                if kind != "DELETED":
                    _observe(pod, times, done)
            reason = "the watch ended"
        except (RuntimeError, aiohttp.ClientError, TimeoutError, ValueError) as error:
            reason = f"{type(error).__name__}: {error}"[:300]
        times.watch_restarts.append(reason)
        await asyncio.sleep(0.2)
        version = await catch_up(client, namespace, times, done)


async def create_pod(client: KubeClient, manifest: dict[str, Any], times: PodTimes) -> None:
    """Create the pod, retrying what the API server may refuse under load; records when it was created."""
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    request = Request("POST", f"/api/v1/namespaces/{namespace}/pods", manifest)
    for attempt in range(6):
        try:
            await client.send(request)
        except ApiError as error:
            if error.status == 409:  # a retried POST that had gone through
                break
            if error.status not in (429, 500, 503, 504) or attempt == 5:
                times.failed_creates += 1
                return
        except (OSError, TimeoutError):
            if attempt == 5:
                times.failed_creates += 1
                return
        else:
            break
        await asyncio.sleep(0.2 * 2**attempt)
    times.created[name] = time.monotonic()
