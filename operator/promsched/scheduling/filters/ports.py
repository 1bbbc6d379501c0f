"""Host ports already taken on the node, as kube-scheduler's NodePorts plugin."""

from __future__ import annotations

from typing import Final

from promsched.scheduling.filters.queueing_hints import NO_HINTS
from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import WILDCARD_HOST_IP, HostPort, PodInfo

REASON: Final = "node(s) didn't have free ports for the requested pod ports"


def conflicts(wanted: HostPort, used: HostPort) -> bool:
    """Same protocol and port on overlapping addresses; 0.0.0.0 overlaps every address."""
    return (
        wanted.port == used.port
        and wanted.protocol == used.protocol
        and (wanted.host_ip == used.host_ip or WILDCARD_HOST_IP in (wanted.host_ip, used.host_ip))
    )


class NodePorts:
    name = "NodePorts"
    # On the boards, which judge anew the nodes whose pods changed (see node_verdicts); not usage-totals
    # only: a node's host ports may change while its totals stay the same.
    usage_only = True
    events = ClusterEvent.NODE_ADDED | ClusterEvent.ASSIGNED_POD_DELETED
    hints = NO_HINTS

    def concerns(self, pod: PodInfo) -> bool:
        return bool(pod.host_ports)

    def filter(self, pod: PodInfo, node: NodeInfo, usage: NodeUsage) -> Status | None:
        if not pod.host_ports or not usage.host_ports:
            return None
        for wanted in pod.host_ports:
            if any(conflicts(wanted, used) for used in usage.host_ports):
                return _REJECTED
        return None


_REJECTED: Final = Status(REASON, Code.UNSCHEDULABLE, NodePorts.events)
