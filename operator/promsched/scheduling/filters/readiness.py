"""Nodes whose Ready condition is not True.

kube-scheduler has no such filter: the node lifecycle controller taints such nodes and the taint filter
turns pods away (runs before this one, so its message wins). This filter covers the time before the
taint lands, and clusters without that controller, judging the pod by the taint the controller would
set: a pod that tolerates it may go to the node, as it could under kube-scheduler.
"""

from __future__ import annotations

from typing import Final

from promsched.scheduling.filters.queueing_hints import NO_HINTS
from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NO_SCHEDULE, NodeInfo, Taint
from promsched.scheduling.objects.pods import PodInfo

REASON: Final = "node(s) were not ready"
NOT_READY_TAINT: Final = Taint(key="node.kubernetes.io/not-ready", value="", effect=NO_SCHEDULE)
# Ready Unknown, or no Ready condition: the node stopped reporting.
UNREACHABLE_TAINT: Final = Taint(key="node.kubernetes.io/unreachable", value="", effect=NO_SCHEDULE)


class NodeReadiness:
    name = "NodeReadiness"
    node_only = True  # see node_verdicts
    events = ClusterEvent.NODE_ADDED | ClusterEvent.NODE_UPDATED
    hints = NO_HINTS

    def concerns(self, pod: PodInfo) -> bool:
        return True

    def filter(self, pod: PodInfo, node: NodeInfo, usage: NodeUsage) -> Status | None:
        if node.ready:
            return None
        taint = NOT_READY_TAINT if node.conditions.get("Ready") == "False" else UNREACHABLE_TAINT
        return None if pod.tolerates(taint) else _REJECTED


_REJECTED: Final = Status(REASON, Code.UNRESOLVABLE, NodeReadiness.events)
