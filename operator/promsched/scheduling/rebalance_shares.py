"""What a rebalance cycle may move, and how much of a node's value a pod accounts for.

Never moved, whatever the policy says: pods without a controller (nothing would recreate them), mirror
pods (the kubelet owns them), DaemonSet pods (the replacement comes back to the same node), pods being
deleted, and pods not running. Pods with local storage (emptyDir, hostPath) only when the policy allows
it. A pod's share of cpu and memory is its estimated usage over the node's allocatable; other plugins
have no per-pod figure, so a node hot by one of them is reported, not relieved.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from promsched.api.builtins import BuiltinPlugin
from promsched.api.policies import SchedulingPolicySpec
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.pods import PodInfo
from promsched.scheduling.resources import Resources
from promsched.scheduling.selectors import LabelSelector

# A pod -> what it is expected to use (cpu in millicores, memory in bytes); requests by default.
PodEstimate = Callable[[PodInfo], Resources]

_PER_RESOURCE: dict[str, Callable[[Resources], int]] = {
    BuiltinPlugin.CPU.value: lambda resources: resources.milli_cpu,
    BuiltinPlugin.MEMORY.value: lambda resources: resources.memory,
}


def movable(
    pod: PodInfo,
    spec: SchedulingPolicySpec,
    selector: LabelSelector | None,
    now: float,
    moved_controllers: Mapping[str, float],
) -> str | None:
    """Why `pod` may not move, or None when it may."""
    if pod.deletion_timestamp or pod.phase != "Running":
        return "not running"
    if selector is None:
        if pod.scheduler_name != spec.scheduler_name:
            return f"schedulerName is not {spec.scheduler_name}"
    elif not selector.matches(pod.labels):
        return "not selected by spec.rebalance.pods.selector"
    if not pod.controller:
        return "no controller would recreate it"
    if pod.mirror:
        return "a mirror pod"
    if pod.controller.startswith("DaemonSet/"):
        return "a DaemonSet pod"
    if pod.local_storage and not spec.rebalance.pods.allow_local_storage:
        return "uses local storage (emptyDir or hostPath)"
    if pod.started_at is None or now - pod.started_at < spec.rebalance.min_pod_age_seconds:
        return f"younger than minPodAge {spec.rebalance.pods.min_pod_age}"
    if pod.controller in moved_controllers:
        return f"{pod.controller} already lost a pod to a move recently"
    return None


def share_of(
    cache: ClusterCache, pod: PodInfo, plugin: str, node: str, estimate: PodEstimate | None = None
) -> float | None:
    """The points of `plugin`'s value (percent of the node) that `pod` accounts for on `node`; None
    where there is no per-pod figure."""
    amount = _PER_RESOURCE.get(plugin)
    info = cache.nodes.get(node)
    if amount is None or info is None:
        return None
    allocatable = amount(info.allocatable)
    if not allocatable:
        return None
    usage = estimate(pod) if estimate is not None else pod.requests
    return 100.0 * amount(usage) / allocatable
