"""Filtering a node with the pods nominated to it counted, as kube's RunFilterPluginsWithNominatedPods.

A pod that preempted others is nominated to the node it freed (status.nominatedNodeName) until it is
bound there. Its room is held: every other pod of equal or lower priority is filtered as if the
nominated pods of at least its priority already ran on the node. As kube, when those pods were added
and the pod fits, the filters run once more without them, since a pod they helped (by affinity) must
not count on pods that may yet go elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.filters import run_checks, run_filters
from promsched.scheduling.framework import Filter, NodeCheck, Status
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo


def nominated_before(pod: PodInfo, cache: ClusterCache, node: str) -> list[PodInfo]:
    """The other pods nominated to `node` whose priority is at least `pod`'s (kube's
    addGENominatedPods): their room is not `pod`'s to take."""
    held = cache.nominated.get(node)
    if not held:
        return []
    return [other for other in held.values() if other.uid != pod.uid and other.priority >= pod.priority]


def nominated_below(pod: PodInfo, cache: ClusterCache, node: str) -> list[PodInfo]:
    """The other pods nominated to `node` whose priority is below `pod`'s (kube's
    getLowerPriorityNominatedPods): once `pod` is nominated there, they may no longer fit."""
    held = cache.nominated.get(node)
    if not held:
        return []
    return [other for other in held.values() if other.uid != pod.uid and other.priority < pod.priority]


def filter_node(
    pod: PodInfo,
    node: NodeInfo,
    usage: NodeUsage,
    filters: Sequence[Filter],
    checks: Sequence[NodeCheck],
    nominated: Sequence[PodInfo] = (),
) -> Status | None:
    """The first rejection of `pod` on `node` with `usage` on it, by the node filters then the prepared
    cluster checks; with `nominated` counted on the node first, then (when it fits) without them."""
    if nominated:
        status = _run(pod, node, usage.without(()), filters, checks, nominated)
        if status is not None:
            return status
    # `_run` with nothing to add, inline: this runs for hundreds of nodes in every cycle.
    status = run_filters(pod, node, usage, filters)
    if status is None and checks:
        status = run_checks(node, checks)
    return status


def _run(
    pod: PodInfo,
    node: NodeInfo,
    usage: NodeUsage,
    filters: Sequence[Filter],
    checks: Sequence[NodeCheck],
    added: Sequence[PodInfo],
) -> Status | None:
    """`usage` is changed (a copy when `added`); the checks are left as they were found."""
    for other in added:
        usage.add(other)
        for check in checks:
            check.add_pod(other, node)
    try:
        status = run_filters(pod, node, usage, filters)
        if status is None and checks:
            status = run_checks(node, checks)
        return status
    finally:
        for other in added:
            for check in checks:
                check.remove_pod(other, node)
