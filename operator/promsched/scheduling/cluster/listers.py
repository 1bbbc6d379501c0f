"""What the indexes kept beside the cache read of it, as kube's framework reads its snapshot through
listers (framework.NodeInfoLister): the indexes depend on these, not on the cache that holds them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from promsched.scheduling.cluster.change_feeds import ChangeFeed
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.selectors import LabelSelector


class NodeLister(Protocol):
    @property
    def nodes(self) -> Mapping[str, NodeInfo]: ...

    @property
    def node_changes(self) -> ChangeFeed:
        """Marked with a node's name whenever its object changes."""
        ...


class PodLister(Protocol):
    @property
    def node_pods(self) -> Mapping[str, Mapping[str, PodInfo]]:
        """Node -> its counted pods by uid."""
        ...

    @property
    def usage_changes(self) -> ChangeFeed:
        """Marked with a node's name whenever the pods counted on it change."""
        ...

    def pods_selected_by(self, selector: LabelSelector) -> Iterator[tuple[str, PodInfo]]: ...


class ClusterLister(NodeLister, PodLister, Protocol):
    """Both, for what is derived from nodes and their pods together."""
