"""Cordoned nodes (spec.unschedulable), as kube-scheduler's NodeUnschedulable plugin."""

from __future__ import annotations

from typing import Final

from promsched.scheduling.filters.queueing_hints import NO_HINTS
from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NO_SCHEDULE, NodeInfo, Taint
from promsched.scheduling.objects.pods import PodInfo

REASON: Final = "node(s) were unschedulable"
# A pod that tolerates the taint `kubectl cordon` stands for may go to a cordoned node (DaemonSets do).
UNSCHEDULABLE_TAINT: Final = Taint(key="node.kubernetes.io/unschedulable", value="", effect=NO_SCHEDULE)


class NodeUnschedulable:
    name = "NodeUnschedulable"
    node_only = True  # see node_verdicts
    events = ClusterEvent.NODE_ADDED | ClusterEvent.NODE_UPDATED
    hints = NO_HINTS

    def concerns(self, pod: PodInfo) -> bool:
        return True

    def filter(self, pod: PodInfo, node: NodeInfo, usage: NodeUsage) -> Status | None:
        if node.unschedulable and not pod.tolerates(UNSCHEDULABLE_TAINT):
            return _REJECTED
        return None


_REJECTED: Final = Status(REASON, Code.UNRESOLVABLE, NodeUnschedulable.events)
