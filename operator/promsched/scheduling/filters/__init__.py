"""Filters decide which nodes a pod may go to, with kube-scheduler's semantics and messages.

One filter per module, each the counterpart of a kube-scheduler Filter plugin, and an explicit
registry in kube's order. A filter returns None when the node passes, or a `Status`: a code (whether
evicting pods could lift it) and a reason, the key the FailedScheduling message counts nodes by, so it
never names the node. Each filter declares the cluster events that can lift its rejections (`events`),
so a pod it rejected waits for one of those.

Node filters judge a node by the node and what its pods take (`Filter`); those that read the node alone
say so (`node_only`), and their verdicts are kept across pods (`node_verdicts`). Cluster filters judge it by
more: other pods' labels and affinity terms, namespaces, volumes (`ClusterFilter`). As kube's PreFilter
step, a cluster filter prepares once per pod and cycle what it needs from the whole cluster (counts of
matching pods per topology domain, the pod's bound volumes); each node is then checked by lookups. It
may also reject the pod outright, for a reason about the pod rather than any node (a missing claim).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from promsched.scheduling.filters.fit import NodeResourcesFit
from promsched.scheduling.filters.interpod_affinity import InterPodAffinity
from promsched.scheduling.filters.node_affinity import NodeAffinity
from promsched.scheduling.filters.node_names import AffinityNodeNames
from promsched.scheduling.filters.ports import NodePorts
from promsched.scheduling.filters.readiness import NodeReadiness
from promsched.scheduling.filters.taints import TaintToleration
from promsched.scheduling.filters.topology_spread import PodTopologySpread
from promsched.scheduling.filters.unschedulable import NodeUnschedulable
from promsched.scheduling.filters.volume_binding import VolumeBinding
from promsched.scheduling.filters.volume_limits import NodeVolumeLimits
from promsched.scheduling.filters.volume_restrictions import VolumeRestrictions
from promsched.scheduling.filters.volume_zone import VolumeZone
from promsched.scheduling.framework import (
    ClusterEvent,
    ClusterFilter,
    Filter,
    FilterPlugin,
    NodeCheck,
    QueueingHint,
    Rejection,
    RejectionsKnown,
    Status,
)
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache

NO_NODES: Final = "no nodes available to schedule pods"


# kube-scheduler's order: the NodeAffinity PreFilter's node names, then the default Filter plugins.
# Readiness (not a kube filter) follows taints, so that kube's message for the not-ready taint wins.
DEFAULT_FILTERS: Final[tuple[Filter, ...]] = (
    AffinityNodeNames(),
    NodeUnschedulable(),
    TaintToleration(),
    NodeReadiness(),
    NodeAffinity(),
    NodePorts(),
    NodeResourcesFit(),
)


# kube-scheduler's order for the filters that look beyond the node; they run after the node filters.
DEFAULT_CLUSTER_FILTERS: Final[tuple[ClusterFilter, ...]] = (
    VolumeRestrictions(),
    NodeVolumeLimits(),
    VolumeBinding(),
    VolumeZone(),
    PodTopologySpread(),
    InterPodAffinity(),
)


def queueing_hints(
    filters: Iterable[FilterPlugin],
) -> Mapping[ClusterEvent, tuple[QueueingHint, ...]]:
    """Per event, the hints of the filters that declare it, for the events every such filter has a
    hint for; the queue wakes on any other event every pod whose rejection declared it."""
    hints: dict[ClusterEvent, list[QueueingHint]] = {}
    unhinted: set[ClusterEvent] = set()
    for each in filters:
        for event in each.events:
            hint = each.hints.get(event)
            if hint is None:
                unhinted.add(event)
            else:
                hints.setdefault(event, []).append(hint)
    return {event: tuple(dict.fromkeys(found)) for event, found in hints.items() if event not in unhinted}


QUEUEING_HINTS: Final = queueing_hints((*DEFAULT_FILTERS, *DEFAULT_CLUSTER_FILTERS))


def run_filters(
    pod: PodInfo, node: NodeInfo, usage: NodeUsage, filters: Iterable[Filter] = DEFAULT_FILTERS
) -> Status | None:
    """The first rejection a filter gives against the node, or None when all pass (kube stops at the
    first failing filter too)."""
    for node_filter in filters:
        status = node_filter.filter(pod, node, usage)
        if status is not None:
            return status
    return None


def run_checks(node: NodeInfo, checks: Iterable[NodeCheck]) -> Status | None:
    """The first rejection a prepared cluster check gives against the node, or None when all pass."""
    for check in checks:
        status = check.check(node)
        if status is not None:
            return status
    return None


def known_rejections(checks: Iterable[NodeCheck], cache: ClusterCache) -> dict[str, Status] | None:
    """The nodes the prepared checks reject, each with what `run_checks` would give it, when every check
    can tell (`RejectionsKnown`); else None."""
    rejected: dict[str, Status] = {}
    for check in checks:
        own = check.rejections(cache) if isinstance(check, RejectionsKnown) else None
        if own is None:
            return None
        rejected = own | rejected  # the first check's status where two reject, as run_checks stops at it
    return rejected


def summarize_failures(total_nodes: int, reasons: Mapping[str, int]) -> str:
    """kube-scheduler's FailedScheduling text, from how many nodes failed for each reason.

    ``0/6 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu.``
    Entries read ``<count> <reason>`` and are sorted as whole strings, as kube sorts them (so by count
    first, as text: "10 ..." before "2 ...").
    """
    if total_nodes == 0:
        return NO_NODES
    histogram = sorted(f"{count} {reason}" for reason, count in reasons.items() if count > 0)
    available = f"0/{total_nodes} nodes are available:"
    return f"{available} {', '.join(histogram)}." if histogram else available


def summarize_rejection(total_nodes: int, rejection: Rejection) -> str:
    """kube-scheduler's FailedScheduling text when a PreFilter rejected the pod."""
    if total_nodes == 0:
        return NO_NODES
    return f"0/{total_nodes} nodes are available: {rejection.message}."
