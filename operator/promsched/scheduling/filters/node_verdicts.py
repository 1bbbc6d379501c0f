"""Node filters' verdicts, kept across pods: most pods of a burst share their spec, and a node that
passed the filters for one of them passes them for the next while the node and what its pods take stay
the same.

A filter is node-only (`node_only = True` on its class) when its verdict depends on nothing but the
node object and the parts of the pod that `pod_key` holds: tolerations, node selector, required node
affinity. A filter reads usage totals only (`usage_totals_only = True`) when its verdict depends on the
node object, the pod's requests and the node's usage totals (`requested`, `pods`) alone: not on host
ports, which change in place. Only a leading run of node-only filters is kept, or all of a pod's
filters when every one after that run reads usage totals only, so the first failing filter, and with
it the reason counted, stays the one kube's order gives.

Boards (`cycle.boards`) keep every node's verdict and judge anew the nodes whose object or counted pods
changed (the cache's change feeds), so they take, besides, filters that read more of the usage than its
totals: a filter reads the usage only (`usage_only = True`) when its verdict depends on the node object,
what `usage_key` holds of the pod and what the pods counted on the node take (`NodeUsage`), host ports
included.

A verdict is kept with the node object it was reached on (the cache replaces that object whenever the
node changes) and, for usage-total verdicts, with the usage's `requested` (an immutable value, replaced
whenever a pod is counted or uncounted) and pod count, so a changed node is judged anew.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Final

from promsched.scheduling.framework import Status
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.resources import Resources

# Distinct pod specs whose verdicts are kept (the least recently used go first): a burst has a few, and
# each kept one holds up to a verdict per node (about 100 bytes: 1.6 MB at 16 specs on 1000 nodes).
SPECS_KEPT: Final = 16

# node name -> (the node object judged, the usage's requested and pod count it was judged with, or
# None and 0 for node-only filters, the first filter's rejection or None)
Verdict = tuple[NodeInfo, Resources | None, int, Status | None]
Verdicts = dict[str, Verdict]


def node_only_prefix(filters: Sequence[object]) -> int:
    """How many of `filters`, from the first, are node-only."""
    count = 0
    for node_filter in filters:
        if not getattr(node_filter, "node_only", False):
            break
        count += 1
    return count


def usage_totals_only(filters: Sequence[object]) -> bool:
    """Whether every one of `filters` reads no more of a node's usage than its totals."""
    return all(getattr(node_filter, "usage_totals_only", False) for node_filter in filters)


def pod_key(pod: PodInfo) -> Hashable:
    """What node-only filters read of a pod."""
    return pod.tolerations, tuple(pod.node_selector.items()), pod.required_affinity


def usage_only(filters: Sequence[object]) -> bool:
    """Whether every one of `filters` reads no more of a node than its object and its usage (those that
    read its usage totals alone among them)."""
    return all(
        getattr(node_filter, "usage_only", False) or getattr(node_filter, "usage_totals_only", False)
        for node_filter in filters
    )


def requests_key(pod: PodInfo) -> Hashable:
    """What usage-total filters read of a pod besides `pod_key`: its requests."""
    requests = pod.requests
    return requests.milli_cpu, requests.memory, requests.ephemeral_storage, tuple(requests.scalars.items())


def usage_key(pod: PodInfo) -> Hashable:
    """What usage-only filters read of a pod besides `pod_key`: its requests and host ports."""
    return requests_key(pod), pod.host_ports


class NodeVerdicts:
    """Verdicts per (filters, pod key) and node; with usage totals, per the pod's requests too."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Hashable, Verdicts] = OrderedDict()

    def of(self, filters: tuple[object, ...], pod: PodInfo, *, with_usage: bool = False) -> Verdicts:
        """The verdicts of `filters` (node-only, or with usage totals when `with_usage`) for pods like
        `pod`, to read and fill."""
        key = (filters, pod_key(pod), requests_key(pod) if with_usage else None)
        verdicts = self._kept.get(key)
        if verdicts is None:
            verdicts = self._kept[key] = {}
            if len(self._kept) > SPECS_KEPT:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(key)
        return verdicts
