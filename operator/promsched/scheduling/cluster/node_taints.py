"""The cluster's nodes with a PreferNoSchedule taint, kept beside its cache and brought up to date by the
nodes whose object changed (the cache's node change feed).

Most clusters taint no node so, and a pod's TaintToleration score then skips (kube's PreScore Skip)
without looking at the nodes it would score.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field

from promsched.scheduling.cluster.listers import NodeLister
from promsched.scheduling.objects.nodes import PREFER_NO_SCHEDULE


@dataclass(slots=True)
class PreferNoScheduleNodes:
    names: set[str] = field(default_factory=set)
    version: int = -1  # the cache's node change count it is up to date with; -1: never built

    def following(self, cache: NodeLister) -> Set[str]:
        """The nodes with a PreferNoSchedule taint, as of `cache`."""
        feed = cache.node_changes
        if self.version == feed.count:
            return self.names
        changed = cache.nodes if self.version < 0 else feed.since(self.version)
        for name in changed:
            node = cache.nodes.get(name)
            if node is not None and any(taint.effect == PREFER_NO_SCHEDULE for taint in node.taints):
                self.names.add(name)
            else:
                self.names.discard(name)
        self.version = feed.count
        return self.names
