"""What placement rules read of the cluster, derived from the cache and kept beside it; each part is
brought up to date by the cache's change feeds when it is read, and built at its first use, so a cluster
whose pods have no such rules holds none of it."""

from __future__ import annotations

from dataclasses import dataclass, field

from promsched.scheduling.cluster.affinity_matches import AffinityMatches
from promsched.scheduling.cluster.matching_pods import MatchingPods
from promsched.scheduling.cluster.node_labels import NodeLabelIndex
from promsched.scheduling.cluster.node_taints import PreferNoScheduleNodes
from promsched.scheduling.cluster.spread_layouts import SpreadLayouts


@dataclass(slots=True)
class PlacementIndexes:
    node_labels: NodeLabelIndex = field(default_factory=NodeLabelIndex)  # nodes by label
    spread_layouts: SpreadLayouts = field(default_factory=SpreadLayouts)  # spreading's domains per pod shape
    matching_pods: MatchingPods = field(default_factory=MatchingPods)  # a selector's pods per node
    affinity_matches: AffinityMatches = field(default_factory=AffinityMatches)  # affinity's counts per domain
    prefer_no_schedule: PreferNoScheduleNodes = field(default_factory=PreferNoScheduleNodes)  # tainted so
