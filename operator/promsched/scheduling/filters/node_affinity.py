"""spec.nodeSelector and required node affinity, as kube-scheduler's NodeAffinity plugin: every
nodeSelector label must be on the node with that value, and one of the required terms must match."""

from __future__ import annotations

from typing import Final

from promsched.scheduling.filters.queueing_hints import NO_HINTS
from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

REASON: Final = "node(s) didn't match Pod's node affinity/selector"


class NodeAffinity:
    name = "NodeAffinity"
    node_only = True  # see node_verdicts
    events = ClusterEvent.NODE_ADDED | ClusterEvent.NODE_UPDATED
    hints = NO_HINTS

    def concerns(self, pod: PodInfo) -> bool:
        return bool(pod.node_selector) or pod.required_affinity is not None

    def filter(self, pod: PodInfo, node: NodeInfo, usage: NodeUsage) -> Status | None:
        return None if pod.selects_node(node) else _REJECTED


_REJECTED: Final = Status(REASON, Code.UNRESOLVABLE, NodeAffinity.events)
