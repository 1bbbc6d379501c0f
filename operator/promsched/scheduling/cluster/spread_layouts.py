"""Which nodes a pod's topology spread constraints count, and in which domain, kept across pods.

kube's PodTopologySpread walks every node in each cycle, in PreFilter and in PreScore, for the nodes that
carry every constraint's topology key and that each constraint's inclusion policies admit. Only the node
objects decide that, with what the policies read of the pod (its node selector and required node
affinity, its tolerations), so a layout is worked out once for pods alike and brought up to date by the
nodes whose object changed since (the cache's node change feed). Counting a pod's domains then costs its
domains and the nodes with pods its selector matches, not a walk over every node: at 1000 nodes a
zone-spread pod's decision took 3.3 ms before, 1.4 ms after (`python -m bench.decide_micro --shapes all`).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from promsched.scheduling.cluster.listers import NodeLister
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.spread_constraints import SpreadConstraint

# Layouts kept (the least recently used go first): a cluster has a few spread pod shapes at a time.
LAYOUTS_KEPT: Final = 16


@dataclass(slots=True)
class SpreadLayout:
    """For one set of constraints and the pod fields their inclusion policies read: the nodes carrying
    every topology key, and per constraint each counted node's domain and each domain's node count."""

    pod: PodInfo  # the first pod of this shape: what its inclusion policies read is the same for all
    constraints: tuple[SpreadConstraint, ...]
    carrying: set[str]
    domains: tuple[dict[str, str], ...]  # per constraint: node -> its domain, for the nodes it counts
    sizes: tuple[Counter[str], ...]  # per constraint: domain -> nodes counted in it (none at 0)
    version: int  # the cache's node change count this is up to date with; -1: none placed yet

    def follow(self, nodes: Mapping[str, NodeInfo], changed: Iterable[str], version: int) -> None:
        """Bring the changed nodes (gone, added or relabelled) up to date."""
        for name in changed:
            self.carrying.discard(name)
            for domains, sizes in zip(self.domains, self.sizes, strict=True):
                domain = domains.pop(name, None)
                if domain is not None:
                    sizes[domain] -= 1
                    if not sizes[domain]:
                        del sizes[domain]
            node = nodes.get(name)
            if node is not None:
                self._place(node)
        self.version = version

    def _place(self, node: NodeInfo) -> None:
        labels = node.labels
        if not all(constraint.topology_key in labels for constraint in self.constraints):
            return
        self.carrying.add(node.name)
        for constraint, domains, sizes in zip(self.constraints, self.domains, self.sizes, strict=True):
            if _admits(constraint, self.pod, node):
                domain = domains[node.name] = labels[constraint.topology_key]
                sizes[domain] += 1

    def domain_counts(self, per_node: list[Mapping[str, int]]) -> list[dict[str, int]]:
        """For each constraint, domain -> the matching pods on the nodes it counts there (`per_node` of
        that constraint, summed), every counted domain present."""
        counts = []
        for domains, sizes, matching in zip(self.domains, self.sizes, per_node, strict=True):
            count = dict.fromkeys(sizes, 0)
            for name, pods in matching.items():
                domain = domains.get(name)
                if domain is not None:
                    count[domain] += pods
            counts.append(count)
        return counts


class SpreadLayouts:
    """The cluster's layouts by constraint shape, kept beside its cache."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Hashable, SpreadLayout] = OrderedDict()

    def of(self, pod: PodInfo, constraints: tuple[SpreadConstraint, ...], cache: NodeLister) -> SpreadLayout:
        """The layout of `constraints` for pods like `pod`, up to date with `cache`'s nodes."""
        key = _shape(pod, constraints)
        feed = cache.node_changes
        layout = self._kept.get(key)
        if layout is None:
            domains: tuple[dict[str, str], ...] = tuple({} for _ in constraints)
            sizes: tuple[Counter[str], ...] = tuple(Counter() for _ in constraints)
            layout = self._kept[key] = SpreadLayout(pod, constraints, set(), domains, sizes, version=-1)
            if len(self._kept) > LAYOUTS_KEPT:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(key)
        if layout.version != feed.count:
            # A new layout places every node; a kept one, those changed since.
            changed = cache.nodes if layout.version < 0 else feed.since(layout.version)
            layout.follow(cache.nodes, changed, feed.count)
        return layout


def _admits(constraint: SpreadConstraint, pod: PodInfo, node: NodeInfo) -> bool:
    """Whether `node` counts towards `constraint`'s domains for pods like `pod` (its inclusion policies)."""
    if constraint.honor_node_affinity and not pod.selects_node(node):
        return False
    return not (constraint.honor_node_taints and pod.untolerated_filtering_taint(node) is not None)


def _shape(pod: PodInfo, constraints: tuple[SpreadConstraint, ...]) -> Hashable:
    """What decides a layout: each constraint's key and inclusion policies, and the pod fields those
    policies read (node affinity: its node selector and required affinity; taints: its tolerations)."""
    policies = tuple(
        (constraint.topology_key, constraint.honor_node_affinity, constraint.honor_node_taints)
        for constraint in constraints
    )
    affinity = None
    if any(constraint.honor_node_affinity for constraint in constraints):
        affinity = tuple(pod.node_selector.items()), pod.required_affinity
    tolerations = pod.tolerations if any(constraint.honor_node_taints for constraint in constraints) else None
    return policies, affinity, tolerations
