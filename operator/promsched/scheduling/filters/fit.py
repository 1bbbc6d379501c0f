"""Room on the node for the pod's requests and one more pod, as kube-scheduler's NodeResourcesFit plugin.

Requests count against allocatable less what the node's pods already request, not against live use
(that is the metrics' part). An extended resource the node does not offer is Insufficient. kube lists
every short resource; one reason per node is kept here, the first in kube's order (pods, cpu, memory,
ephemeral-storage, extended resources by name).
"""

from __future__ import annotations

import functools
from typing import Final

from promsched.scheduling.filters.queueing_hints import NO_HINTS
from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

TOO_MANY_PODS: Final = "Too many pods"
INSUFFICIENT: Final = "Insufficient "  # followed by the resource's name


class NodeResourcesFit:
    name = "NodeResourcesFit"
    usage_totals_only = True  # see node_verdicts
    events = (
        ClusterEvent.NODE_ADDED
        | ClusterEvent.NODE_UPDATED
        | ClusterEvent.ASSIGNED_POD_DELETED
        | ClusterEvent.ASSIGNED_POD_SCALED_DOWN
    )
    hints = NO_HINTS

    def concerns(self, pod: PodInfo) -> bool:
        return True

    def filter(self, pod: PodInfo, node: NodeInfo, usage: NodeUsage) -> Status | None:
        if usage.pods + 1 > node.allocatable_pods:
            return _TOO_MANY_PODS
        short = pod.requests.insufficient(usage.requested, node.allocatable)
        return _insufficient(short[0]) if short else None


_TOO_MANY_PODS: Final = Status(TOO_MANY_PODS, Code.UNSCHEDULABLE, NodeResourcesFit.events)


@functools.cache
def _insufficient(resource: str) -> Status:
    return Status(f"{INSUFFICIENT}{resource}", Code.UNSCHEDULABLE, NodeResourcesFit.events)
