"""How many of a namespace's pods a label selector matches on each node, kept across pods.

Topology spreading counts, in each cycle, the pods its selector matches per node (kube's PreFilter and
PreScore walk every node's pods for it). In a burst of one Deployment's pods that is every pod placed so
far, for each pod: a 2,000-pod burst at 1000 nodes spent 14% of its CPU there (bench.benchmark --shape
spread-zone --profile). The counts are kept per selector and namespace and brought up to date by the
nodes whose counted pods changed since (the cache's usage change feed).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from promsched.scheduling.cluster.listers import PodLister
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.selectors import LabelSelector

# Counts kept (the least recently used go first): a burst has a few selectors.
COUNTS_KEPT: Final = 16


@dataclass(slots=True)
class _Counts:
    per_node: Counter[str]
    version: int  # the cache's usage change count they are up to date with


class MatchingPods:
    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[LabelSelector, str], _Counts] = OrderedDict()

    def per_node(self, selector: LabelSelector, namespace: str, cache: PodLister) -> Mapping[str, int]:
        """Node -> the counted pods of `namespace` that `selector` matches there, terminating ones left
        out (as kube counts them for spreading); read-only."""
        key = (selector, namespace)
        feed = cache.usage_changes
        kept = self._kept.get(key)
        if kept is None:
            per_node: Counter[str] = Counter()
            for node, pod in cache.pods_selected_by(selector):
                if _counts(pod, namespace):
                    per_node[node] += 1
            kept = self._kept[key] = _Counts(per_node, feed.count)
            if len(self._kept) > COUNTS_KEPT:
                self._kept.popitem(last=False)
            return kept.per_node
        self._kept.move_to_end(key)
        if kept.version != feed.count:
            for node in feed.since(kept.version):
                pods = cache.node_pods.get(node, {}).values()
                count = sum(1 for pod in pods if _counts(pod, namespace) and selector.matches(pod.labels))
                if count:
                    kept.per_node[node] = count
                else:
                    kept.per_node.pop(node, None)
            kept.version = feed.count
        return kept.per_node


def _counts(pod: PodInfo, namespace: str) -> bool:
    return pod.namespace == namespace and not pod.deletion_timestamp
