"""The cluster's nodes by label, kept beside its cache and brought up to date by the nodes whose object
changed (the cache's node change feed).

Cluster checks that reject the nodes of some topology domains (topology spreading, pod anti-affinity)
find those nodes here, so a decision visits them and not every node. It is built at the first use, so a
cluster whose pods have no such rules holds none of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Final

from promsched.scheduling.cluster.listers import NodeLister

_NONE: Final[frozenset[str]] = frozenset()


@dataclass(slots=True)
class NodeLabelIndex:
    by_label: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # key -> value -> nodes
    carrying: Counter[str] = field(default_factory=Counter)  # key -> nodes carrying it
    indexed: dict[str, Mapping[str, str]] = field(default_factory=dict)  # node -> its labels indexed
    version: int = -1  # the cache's node change count it is up to date with; -1: never built

    def following(self, cache: NodeLister) -> NodeLabelIndex:
        """This index, up to date with `cache`'s nodes."""
        feed = cache.node_changes
        if self.version == feed.count:
            return self
        changed = cache.nodes if self.version < 0 else feed.since(self.version)
        for name in changed:
            self._drop(name)
            node = cache.nodes.get(name)
            if node is not None:
                self._add(name, node.labels)
        self.version = feed.count
        return self

    def named(self, key: str, value: str) -> Set[str]:
        """The nodes whose label `key` is `value`."""
        return self.by_label.get(key, {}).get(value, _NONE)

    def lacking(self, key: str, cache: NodeLister) -> list[str]:
        """The nodes without label `key`: none to look for when every node carries it."""
        if self.carrying[key] == len(cache.nodes):
            return []
        return [name for name, node in cache.nodes.items() if key not in node.labels]

    def _add(self, name: str, labels: Mapping[str, str]) -> None:
        self.indexed[name] = labels
        for key, value in labels.items():
            self.by_label.setdefault(key, {}).setdefault(value, set()).add(name)
            self.carrying[key] += 1

    def _drop(self, name: str) -> None:
        labels = self.indexed.pop(name, None)
        if labels is None:
            return
        for key, value in labels.items():
            by_value = self.by_label[key]
            holders = by_value[value]
            holders.discard(name)
            if not holders:
                del by_value[value]
            self.carrying[key] -= 1
