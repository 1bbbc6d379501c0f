"""Taints the pod does not tolerate, as kube-scheduler's TaintToleration plugin.

Only NoSchedule and NoExecute taints keep pods off; PreferNoSchedule only weighs in scoring. The reason
names the node's first untolerated taint, in kube's words: ``{key: value}`` (``{key: }`` without value).
"""

from __future__ import annotations

from promsched.scheduling.filters.queueing_hints import NO_HINTS
from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo


class TaintToleration:
    name = "TaintToleration"
    node_only = True  # see node_verdicts
    events = ClusterEvent.NODE_ADDED | ClusterEvent.NODE_UPDATED
    hints = NO_HINTS

    def concerns(self, pod: PodInfo) -> bool:
        return True

    def filter(self, pod: PodInfo, node: NodeInfo, usage: NodeUsage) -> Status | None:
        taint = pod.untolerated_filtering_taint(node)
        if taint is None:
            return None
        reason = f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
        return Status(reason, Code.UNRESOLVABLE, self.events)
