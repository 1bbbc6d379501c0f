"""What a cluster filter prepares for one pod and cycle: a per-node check, or a rejection of the pod."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from promsched.scheduling.framework import ClusterEvent, Status
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache


@dataclass(frozen=True, slots=True)
class Rejection:
    """The pod fits no node for a reason about the pod itself. `message` follows "0/N nodes are
    available:" in FailedScheduling, as kube reports a PreFilter that fails; `lifted_by` the events
    that may change that (the rejecting filter's declaration)."""

    message: str
    lifted_by: ClusterEvent = ClusterEvent.ANY


class NodeCheck(Protocol):
    """A cluster filter's state for one pod in one cycle; checking a node is a lookup in it."""

    def check(self, node: NodeInfo) -> Status | None:
        """None if the pod may go to `node`; else why not, naming no node."""

    def remove_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        """Count `pod` on `node` as gone (a pod preemption would evict), as kube's PreFilter extensions
        do."""

    def add_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        """Count again a pod that `remove_pod` took away."""


@runtime_checkable
class RejectionsKnown(Protocol):
    """A check that can tell which nodes it rejects without visiting each: those of a few topology
    domains. `decide` then looks the other nodes' verdicts up on its boards."""

    def rejections(self, cache: ClusterCache) -> dict[str, Status] | None:
        """Node -> why, for every node of `cache` it rejects (`check`'s statuses); None when it cannot
        tell this time, and each node is to be checked."""


class PodIndependentCheck:
    """For checks that do not depend on which pods run where (volumes): evictions change nothing."""

    def remove_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        return

    def add_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        return
