"""What a rebalance cycle may move, and how much of a node's value a pod accounts for.

Never moved, whatever the policy says: pods without a controller (nothing would recreate them), mirror
pods (the kubelet owns them), DaemonSet pods (the replacement comes back to the same node), pods being
deleted, pods not running, and pods outside the operator's --namespaces (its RBAC is theirs: an eviction
elsewhere is refused). Pods with local storage (emptyDir, hostPath) only when the policy allows it.

A pod's share of cpu and memory is its usage over the node's allocatable: what it was observed to use
(its containers' cAdvisor series over the window, as Koordinator's LowNodeLoad ranks pods), else, where
those series show nothing, the policy's estimate (spec.estimation), the one scheduling counts a placed
pod at. Other plugins have no per-pod figure, so a node hot by one of them is reported, not relieved.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from promsched.api.builtins import BuiltinPlugin
from promsched.api.policies import SchedulingPolicySpec
from promsched.metrics.querying import PrometheusClient
from promsched.metrics.usage_querying import PodUsage, QueryFinished, refresh_usage
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.estimating import ESTIMATED_PLUGINS, Estimates
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.selectors import LabelSelector
from promsched.scheduling.rebalance.plans import Share, Threshold


def movable(
    pod: PodInfo,
    spec: SchedulingPolicySpec,
    selector: LabelSelector | None,
    now: float,
    moved_controllers: Mapping[str, float],
    namespaces: frozenset[str] | None = None,
) -> str | None:
    """Why `pod` may not move, or None when it may. `namespaces`: those the operator may write in
    (None: all)."""
    if pod.deletion_timestamp or pod.phase != "Running":
        return "not running"
    if namespaces is not None and pod.namespace not in namespaces:
        return "its namespace is not among the operator's --namespaces"
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


# The pods' usage queries, as promsched_prometheus_query_duration_seconds{plugin} names them.
USAGE_QUERY_NAMES = ("rebalance.cpu", "rebalance.memory")


async def observed_usage(
    client: PrometheusClient,
    finished: QueryFinished,
    thresholds: Collection[Threshold],
    hot: Iterable[str],
    candidates: Callable[[str], Sequence[PodInfo]],
    window_seconds: float,
    at: float,
) -> PodUsage:
    """What the movable pods of the `hot` nodes used over the window: one query per resource for all of
    them (each told to `finished`), none when no threshold has a per-pod figure or no hot node a movable
    pod. A failed query leaves no values: the estimates stand in."""
    pods = (
        {(pod.namespace, pod.name) for node in hot for pod in candidates(node)}
        if any(threshold.plugin in ESTIMATED_PLUGINS for threshold in thresholds)
        else set()
    )
    if not pods:
        return PodUsage.empty(window_seconds)
    return await refresh_usage(PodUsage.empty(window_seconds, pods), client, at, finished, USAGE_QUERY_NAMES)


class PodShares:
    """One cycle's shares: `usage` the candidates' observed usage over `window` (a Go duration, for the
    reason), `estimates` the policy's estimates for the pods without series."""

    def __init__(self, cache: ClusterCache, usage: PodUsage, window: str, estimates: Estimates) -> None:
        self.cache = cache
        self.usage = usage
        self.window = window
        self.estimates = estimates

    def of(self, pod: PodInfo, plugin: str, node: str) -> Share | None:
        """The points of `plugin`'s value (percent of the node) that `pod` accounts for on `node`; None
        where there is no per-pod figure."""
        entry = ESTIMATED_PLUGINS.get(plugin)
        info = self.cache.nodes.get(node)
        if entry is None or info is None:
            return None
        allocatable = entry[0](info.allocatable)
        if not allocatable:
            return None
        cpu = plugin == BuiltinPlugin.CPU.value  # else memory: the only other plugin with a per-pod figure
        key = (pod.namespace, pod.name)
        if cpu:
            cores = self.usage.cpu.values.get(key)
            observed, basis = (None if cores is None else 1000.0 * cores), f"observed over {self.window}"
        else:  # a working set is what is held now, not a rate over the window
            observed, basis = self.usage.memory.values.get(key), "observed working set"
        if observed is not None:
            return Share(100.0 * observed / allocatable, basis)
        estimate = self.estimates.of(pod)
        resource = estimate.cpu if cpu else estimate.memory
        return Share(
            100.0 * resource.amount / allocatable, f"estimate: {resource.basis(estimate.owner, cpu=cpu)}"
        )
