"""Pods use what they use: a pod running on a sandbox node adds its usage to the node's metrics, as
promsched's own cpu and memory plugins read them from Prometheus.

The exporter learns of a pod through its watch and counts it from when kwok marks it Running; a counter
takes the usage in over its rate window, so each check polls until the window has filled. Loads are
read by promsched's cpu and memory plugins' own queries, within support.loads.TOLERANCE.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.node_metrics.counters import CPUS, MEMORY_TOTAL_BYTES
from promsched.sandbox.node_metrics.usages import ANNOTATION
from support.loads import node_loads, off_by, wait_for_profile_loads
from support.polling import eventually

pytestmark = pytest.mark.integration

NODE = "node-1"  # the fixture profiles' idlest node: room for the pods' load below 100%
WINDOW = "20s"  # a short CPU window: the usage is taken in, and let go, within it
DEADLINE_SECONDS = 90.0
GIB = 1024**3


@pytest.fixture
def namespace(sandbox: Sandbox) -> Iterator[str]:
    name = f"usage-{uuid.uuid4().hex[:6]}"
    sandbox.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        sandbox.kubectl("delete", "namespace", name, "--wait=false")


def settle_at(sandbox: Sandbox, expected: dict[str, float], what: str) -> None:
    eventually(
        lambda: off_by(node_loads(sandbox, [NODE], WINDOW), {NODE: expected}),
        lambda misses: not misses,
        DEADLINE_SECONDS,
        f"{what}: {NODE} at {expected}",
    )


def start_pod(
    sandbox: Sandbox, namespace: str, name: str, requests: dict[str, str], usage: str | None = None
) -> None:
    """A pod bound to NODE from the start (no scheduler involved), running once kwok says so."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {ANNOTATION: usage} if usage else {},
        },
        "spec": {
            "nodeName": NODE,
            "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": requests}}
            ],
        },
    }
    sandbox.kubectl("create", "-f", "-", input=json.dumps(pod))
    eventually(
        lambda: sandbox.kubectl("get", "pod", name, "-n", namespace, "-o", "jsonpath={.status.phase}").stdout,
        lambda phase: phase == "Running",
        what=f"pod {name} Running",
    )


def container_series(sandbox: Sandbox, namespace: str, pod: str) -> dict[str, float]:
    selector = f'{{namespace="{namespace}",pod="{pod}",container="app",node="{NODE}"}}'
    found = {}
    for name, query in (
        ("cores", f"rate(container_cpu_usage_seconds_total{selector}[{WINDOW}])"),
        ("memory", f"container_memory_working_set_bytes{selector}"),
    ):
        data = urllib.parse.urlencode({"query": query}).encode()
        with urllib.request.urlopen(
            f"{sandbox.prometheus_url}/api/v1/query", data=data, timeout=10
        ) as answer:
            result = json.load(answer)["data"]["result"]
        if result:
            found[name] = float(result[0]["value"][1])
    return found


def test_pods_add_their_usage_to_their_node_and_take_it_away_when_deleted(
    sandbox: Sandbox, namespace: str
) -> None:
    profile = sandbox.profiles()[NODE]
    background = {"cpu": profile["cpu"], "memory": profile["memory"]}
    settle_at(sandbox, background, "before any pod")

    # One core of four and 2Gi of 16Gi, as the annotation says.
    start_pod(sandbox, namespace, "stated", {"cpu": "100m", "memory": "64Mi"}, "cpu=1,memory=2Gi")
    one = {
        "cpu": background["cpu"] + 100 / CPUS,
        "memory": background["memory"] + 100 * 2 * GIB / MEMORY_TOTAL_BYTES,
    }
    settle_at(sandbox, one, "one pod")
    series = eventually(
        lambda: container_series(sandbox, namespace, "stated"),
        lambda found: abs(found.get("cores", 0) - 1.0) < 0.02 and found.get("memory") == 2 * GIB,
        DEADLINE_SECONDS,
        "the pod's container series",
    )
    assert series["memory"] == 2 * GIB

    # Without the annotation: half the CPU request and 80% of the memory request. The two add up.
    start_pod(sandbox, namespace, "defaulted", {"cpu": "1", "memory": "1Gi"})
    two = {
        "cpu": one["cpu"] + 100 * 0.5 / CPUS,
        "memory": one["memory"] + 100 * 0.8 * GIB / MEMORY_TOTAL_BYTES,
    }
    settle_at(sandbox, two, "two pods")

    sandbox.kubectl("delete", "pod", "stated", "defaulted", "-n", namespace, "--wait=false")
    settle_at(sandbox, background, "both pods deleted")
    eventually(
        lambda: container_series(sandbox, namespace, "stated"), lambda found: not found, what="series gone"
    )
    # Leaves the nodes as it found them for the tests after it, whose windows may be longer.
    wait_for_profile_loads(sandbox)
