"""What must hold after any fault: nothing lost, nothing bound twice, nothing overcommitted."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from typing import Any

from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo


def _items(sandbox: Sandbox, *args: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(sandbox.kubectl("get", *args, "-o", "json").stdout)["items"]
    return items


def violations(sandbox: Sandbox, scheduler_names: set[str], operator_url: str) -> list[str]:
    """Every broken invariant, as readable lines (empty: all hold)."""
    problems = []
    pods = _items(sandbox, "pods", "-A")
    nodes = {n["metadata"]["name"]: NodeInfo.from_object(n) for n in _items(sandbox, "nodes")}
    scheduled_events = Counter(
        (e["involvedObject"].get("namespace"), e["involvedObject"]["name"])
        for e in _items(sandbox, "events", "-A", "--field-selector", "reason=Scheduled")
    )
    failed = {
        (e["involvedObject"].get("namespace"), e["involvedObject"]["name"])
        for e in _items(sandbox, "events", "-A", "--field-selector", "reason=FailedScheduling")
    }
    requested: dict[str, Counter[str]] = {name: Counter() for name in nodes}
    for obj in pods:
        pod = PodInfo.from_object(obj)
        if pod.node_name and not pod.is_terminal and pod.node_name in requested:
            usage = requested[pod.node_name]
            usage["cpu"] += pod.requests.milli_cpu
            usage["memory"] += pod.requests.memory
            usage["pods"] += 1
        if pod.scheduler_name not in scheduler_names or pod.deletion_timestamp:
            continue
        key = (pod.namespace, pod.name)
        if scheduled_events[key] > 1:
            problems.append(f"{pod.key} has {scheduled_events[key]} Scheduled events")
        if not pod.node_name and key not in failed:
            problems.append(f"{pod.key} is neither bound nor told why (no FailedScheduling event)")
        node = nodes.get(pod.node_name)
        ours = "promsched.io/decision" in (obj["metadata"].get("annotations") or {})
        if ours and node is not None and any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
            problems.append(f"{pod.key} is on {node.name}, which does not match its nodeSelector")
    for name, usage in requested.items():
        allocatable = nodes[name].allocatable
        if usage["cpu"] > allocatable.milli_cpu or usage["memory"] > allocatable.memory:
            problems.append(f"{name} is overcommitted: {dict(usage)} requested")
        if usage["pods"] > nodes[name].allocatable_pods:
            problems.append(f"{name} holds {usage['pods']} pods, more than it allows")
    try:
        with urllib.request.urlopen(f"{operator_url}/healthz", timeout=10) as response:
            healthy = response.status == 200
    except OSError as error:
        healthy, problems = False, [*problems, f"operator /healthz: {error}"]
    if not healthy:
        problems.append("the operator is not healthy")
    return problems
