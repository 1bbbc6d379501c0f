"""spec.estimation against the sandbox's real Prometheus: a new pod of a ReplicaSet is estimated at what
its running siblings really use (their `sandbox.promsched.io/usage`, as cAdvisor's series show it), and
the first pods, which have no running siblings, at factor x request.

The siblings' CPU is a rate over the estimation window, so it shows their usage in full only once the
window has filled after they started: the test waits for that in Prometheus before adding the pod.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from promsched.metrics import PrometheusClient, PrometheusEndpoint
from promsched.metrics.usage_querying import PodUsage, refresh_usage
from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.node_metrics.usages import ANNOTATION
from support.clusters import Cluster
from support.loads import wait_for_profile_loads
from support.objects import hostname_in
from support.polling import eventually

pytestmark = pytest.mark.integration

REPLICA_SET = "web"
OWNER = f"ReplicaSet/{REPLICA_SET}"
SIBLINGS = 3
WINDOW_SECONDS = 60.0
# Requested far below what the pods use, and estimated by the fallback at 1.5 x and 2 x the requests.
REQUESTS = {"cpu": "200m", "memory": "256Mi"}
USED_MILLI_CPU, USED_MEMORY = 800, 1024**3
# The idler nodes (tests/fixtures/profiles.yaml: 10, 30 and 25% CPU of 4 cores): all three siblings
# on any one of them still get what they ask for. A saturated node would share out less.
NODES = ("node-1", "node-3", "node-5")
ESTIMATION = {
    "source": "Siblings",
    "window": "1m",
    "percentile": 90,
    "fallback": {"cpuFactor": 1.5, "memoryFactor": 2},
}
# The simulated counters are exact; a rate over a full window deviates by scrape jitter only.
CPU_TOLERANCE_MILLI = 0.05 * USED_MILLI_CPU
# A rate while the window fills only grows: seen at this lag, it is no lower in any snapshot since
# (the operator refreshes every 2 s).
LAG_SECONDS = 6.0
DEADLINE_SECONDS = WINDOW_SECONDS + 60.0


def replica_set(cluster: Cluster, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": REPLICA_SET, "namespace": cluster.namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": REPLICA_SET}},
            "template": {
                "metadata": {
                    "labels": {"app": REPLICA_SET},
                    "annotations": {ANNOTATION: f"cpu={USED_MILLI_CPU}m,memory=1Gi"},
                },
                "spec": {
                    "schedulerName": cluster.scheduler_name,
                    "affinity": hostname_in(*NODES),
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": REQUESTS},
                        }
                    ],
                },
            },
        },
    }


def estimates(cluster: Cluster, policy: str) -> dict[str, dict[str, Any]]:
    """The recorded estimate of each of the test's pods the policy decided, by pod name."""
    decisions = cluster.status(policy).get("recentDecisions") or []
    prefix = f"{cluster.namespace}/"
    return {
        decision["pod"].removeprefix(prefix): decision.get("estimate") or {}
        for decision in decisions
        if decision["pod"].startswith(prefix)
    }


def running(cluster: Cluster) -> list[str]:
    return [pod["metadata"]["name"] for pod in cluster.pods() if pod["status"].get("phase") == "Running"]


def sibling_usage(sandbox: Sandbox, at: float) -> PodUsage:
    """What the operator's own usage queries answered at `at`."""

    async def read() -> PodUsage:
        endpoint = PrometheusEndpoint(sandbox.prometheus_url, timeout_seconds=10)
        async with PrometheusClient(endpoint) as client:
            return await refresh_usage(
                PodUsage.empty(WINDOW_SECONDS), client, at, lambda _name, _seconds, _error: None
            )

    return asyncio.run(read())


def off_target(sandbox: Sandbox, namespace: str, pods: list[str]) -> list[str]:
    """The siblings whose usage, LAG_SECONDS ago, was not yet what their annotation says."""
    usage = sibling_usage(sandbox, time.time() - LAG_SECONDS)
    misses = []
    for pod in pods:
        cores = usage.cpu.values.get((namespace, pod), 0.0)
        memory = usage.memory.values.get((namespace, pod))
        if abs(1000 * cores - USED_MILLI_CPU) > CPU_TOLERANCE_MILLI / 2 or memory != USED_MEMORY:
            misses.append(f"{pod}: {1000 * cores:.0f}m, {memory} bytes")
    return misses


def test_a_new_replica_is_estimated_at_its_running_siblings_usage(sandbox: Sandbox, cluster: Cluster) -> None:
    policy = cluster.policy(
        [{"name": "cpu", "timeRange": "1m"}, {"name": "memory", "timeRange": "0s"}],
        estimation=ESTIMATION,
    )
    cluster.apply(replica_set(cluster, SIBLINGS))

    # The first replicas are decided before any of them runs: no sibling shows usage, the rule holds.
    first = eventually(
        lambda: estimates(cluster, policy),
        lambda found: len(found) == SIBLINGS,
        what=f"the decisions of the first {SIBLINGS} replicas",
    )
    for pod, estimate in first.items():
        assert estimate == {
            "milliCpu": 300,
            "memory": 512 * 1024**2,
            "cpuBasis": "1.5 x request 200m",
            "memoryBasis": "2 x request 256Mi",
        }, pod

    siblings = eventually(
        lambda: running(cluster), lambda names: len(names) == SIBLINGS, what="the first replicas Running"
    )
    eventually(
        lambda: off_target(sandbox, cluster.namespace, siblings),
        lambda misses: not misses,
        DEADLINE_SECONDS,
        "the siblings' usage in Prometheus over a full window",
    )

    cluster.sandbox.kubectl(
        "scale", "replicaset", REPLICA_SET, "-n", cluster.namespace, f"--replicas={SIBLINGS + 1}"
    )
    found = eventually(
        lambda: estimates(cluster, policy),
        lambda found: len(found) == SIBLINGS + 1,
        what="the new replica's decision",
    )
    [(new, estimate)] = [(pod, estimate) for pod, estimate in found.items() if pod not in first]
    assert estimate["cpuBasis"] == f"p90 of {SIBLINGS} running siblings ({OWNER})", new
    assert estimate["memoryBasis"] == f"p90 of {SIBLINGS} running siblings ({OWNER})", new
    assert abs(estimate["milliCpu"] - USED_MILLI_CPU) <= CPU_TOLERANCE_MILLI, estimate
    assert estimate["memory"] == USED_MEMORY, estimate

    # Leaves the nodes as it found them for the tests after it (a rate remembers the pods a window).
    cluster.sandbox.kubectl(
        "delete", "replicaset", REPLICA_SET, "-n", cluster.namespace, "--cascade=foreground"
    )
    wait_for_profile_loads(sandbox)
