"""Nodes outside the names a pod's required node affinity confines it to (``matchFields: metadata.name
In``, as DaemonSet pods have), as kube-scheduler's NodeAffinity PreFilter.

kube does not run any filter on such nodes and reports them with the PreFilter's own reason, so this
filter comes first; the nodes it lets through still face the full affinity in the NodeAffinity filter.
"""

from __future__ import annotations

from typing import Final

from promsched.scheduling.filters.queueing_hints import NO_HINTS
from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

REASON: Final = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


class AffinityNodeNames:
    name = "NodeAffinityPreFilter"
    node_only = True  # see node_verdicts
    events = ClusterEvent.NODE_ADDED
    hints = NO_HINTS

    def concerns(self, pod: PodInfo) -> bool:
        return pod.required_affinity is not None and pod.required_affinity.node_names is not None

    def filter(self, pod: PodInfo, node: NodeInfo, usage: NodeUsage) -> Status | None:
        affinity = pod.required_affinity
        if affinity is None or affinity.node_names is None or node.name in affinity.node_names:
            return None
        return _REJECTED


_REJECTED: Final = Status(REASON, Code.UNRESOLVABLE, AffinityNodeNames.events)
