"""Filters decide which nodes a pod may go to, with kube-scheduler's semantics and messages.

One filter per module, each the counterpart of a kube-scheduler Filter plugin, and an explicit
registry in kube's order. A filter returns None when the node passes, or one reason: reasons are the
keys the FailedScheduling message counts nodes by, so they never name the node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Protocol

from promsched.scheduling.filters.fit import NodeResourcesFit
from promsched.scheduling.filters.node_affinity import NodeAffinity
from promsched.scheduling.filters.node_names import AffinityNodeNames
from promsched.scheduling.filters.ports import NodePorts
from promsched.scheduling.filters.readiness import NodeReadiness
from promsched.scheduling.filters.taints import TaintToleration
from promsched.scheduling.filters.unschedulable import NodeUnschedulable
from promsched.scheduling.nodes import NodeInfo, NodeUsage
from promsched.scheduling.pods import PodInfo

NO_NODES: Final = "no nodes available to schedule pods"


class Filter(Protocol):
    @property
    def name(self) -> str:
        """The filter's name in logs; kube's plugin name where there is one."""

    def filter(self, pod: PodInfo, node: NodeInfo, usage: NodeUsage) -> str | None:
        """None if `pod` may go to `node` with `usage` on it; else why not, naming no node."""


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


def run_filters(
    pod: PodInfo, node: NodeInfo, usage: NodeUsage, filters: Iterable[Filter] = DEFAULT_FILTERS
) -> str | None:
    """The first reason a filter gives against the node, or None when all pass (kube stops at the
    first failing filter too)."""
    for node_filter in filters:
        reason = node_filter.filter(pod, node, usage)
        if reason is not None:
            return reason
    return None


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
