"""The node-only filters' verdicts, kept across pods: most pods of a burst share their spec, and a node
that passed the cordon, taint, readiness and affinity filters for one of them passes them for the next.

A filter is node-only (`node_only = True` on its class) when its verdict depends on nothing but the
node object and the parts of the pod that `pod_key` holds: tolerations, node selector, required node
affinity. Only the leading run of such filters is kept, so the first failing filter, and with it the
reason counted, stays the one kube's order gives. A verdict is kept with the node object it was
reached on, and the cache replaces that object whenever the node changes, so a changed node is judged
anew.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Final

from promsched.scheduling.filters.statuses import Status
from promsched.scheduling.nodes import NodeInfo
from promsched.scheduling.pods import PodInfo

# Distinct pod specs whose verdicts are kept (the least recently used go first): a burst has a few, and
# each kept one holds up to a verdict per node (about 85 bytes: 1.4 MB at 16 specs on 1000 nodes).
SPECS_KEPT: Final = 16

# node name -> (the node object judged, the first node-only filter's rejection or None)
Verdicts = dict[str, tuple[NodeInfo, Status | None]]


def node_only_prefix(filters: Sequence[object]) -> int:
    """How many of `filters`, from the first, are node-only."""
    count = 0
    for node_filter in filters:
        if not getattr(node_filter, "node_only", False):
            break
        count += 1
    return count


def pod_key(pod: PodInfo) -> Hashable:
    """What node-only filters read of a pod."""
    return pod.tolerations, tuple(pod.node_selector.items()), pod.required_affinity


class NodeVerdicts:
    """Verdicts per (node-only filters, pod key) and node."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Hashable, Verdicts] = OrderedDict()

    def of(self, filters: tuple[object, ...], pod: PodInfo) -> Verdicts:
        """The verdicts of `filters` (all node-only) for pods like `pod`, to read and fill."""
        key = (filters, pod_key(pod))
        verdicts = self._kept.get(key)
        if verdicts is None:
            verdicts = self._kept[key] = {}
            if len(self._kept) > SPECS_KEPT:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(key)
        return verdicts
