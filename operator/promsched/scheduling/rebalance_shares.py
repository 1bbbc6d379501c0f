"""What a rebalance cycle may move, and how much of a node's value a pod accounts for.

Never moved, whatever the policy says: pods without a controller (nothing would recreate them), mirror
pods (the kubelet owns them), DaemonSet pods (the replacement comes back to the same node), pods being
deleted, and pods not running. Pods with local storage (emptyDir, hostPath) only when the policy allows
it. A pod's share of cpu and memory is its estimated usage over the node's allocatable; other plugins
have no per-pod figure, so a node hot by one of them is reported, not relieved. The estimate is the
policy's own (spec.estimation: its siblings' observed usage, or a rule over its requests), the one
scheduling counts a placed pod at.
"""

from __future__ import annotations

from collections.abc import Mapping

from promsched.api.policies import SchedulingPolicySpec
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.estimating import ESTIMATED_PLUGINS, Estimates
from promsched.scheduling.pods import PodInfo
from promsched.scheduling.selectors import LabelSelector


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


def share_of(cache: ClusterCache, pod: PodInfo, plugin: str, node: str, estimates: Estimates) -> float | None:
    """The points of `plugin`'s value (percent of the node) that `pod` accounts for on `node`, by the
    policy's estimate of its usage; None where there is no per-pod figure."""
    entry = ESTIMATED_PLUGINS.get(plugin)
    info = cache.nodes.get(node)
    if entry is None or info is None:
        return None
    allocatable_of, estimated = entry
    allocatable = allocatable_of(info.allocatable)
    if not allocatable:
        return None
    return 100.0 * estimated(estimates.of(pod)) / allocatable
