"""The scheduling framework's interfaces, as kube-scheduler's framework/interface.go: what a filter says
about a node (`Status`: a code and a reason), and the extension points the filters and scorers implement.

The code tells preemption whether evicting pods from the node could lift the rejection
(Unschedulable) or not (UnschedulableAndUnresolvable). Each filter also declares the cluster events
that can lift its rejections (kube's EventsToRegister); a pod parked as unschedulable goes back to the
queue on those events only, or after the queue's longest wait.

- `Filter`: judges a node by the node and what its pods take (kube's Filter).
- `ClusterFilter`: prepares once per pod and cycle what it needs from the whole cluster (kube's
  PreFilter), a `NodeCheck` then judging each node by lookups, or a `Rejection` of the pod.
- `Scorer`: a placement preference's score for every feasible node (kube's Score with its normalisation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Flag, StrEnum, auto
from typing import Final, Protocol, runtime_checkable

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo


class Code(StrEnum):
    UNSCHEDULABLE = "Unschedulable"
    UNRESOLVABLE = "UnschedulableAndUnresolvable"


class ClusterEvent(Flag):
    """Changes in the cluster that may make a parked pod fit (kube's ClusterEvent, coarser)."""

    NODE_ADDED = auto()
    NODE_UPDATED = auto()  # labels, taints, allocatable, conditions, spec.unschedulable
    NODE_DELETED = auto()
    ASSIGNED_POD_ADDED = auto()  # a pod placed on a node (by anyone)
    ASSIGNED_POD_UPDATED = auto()  # its labels changed
    ASSIGNED_POD_DELETED = auto()  # deleted or finished: its room is free
    ASSIGNED_POD_SCALED_DOWN = auto()  # a resize lowered what it requests
    NAMESPACE_UPDATED = auto()
    CSI_NODE_CHANGED = auto()  # a CSINode added, or one of its drivers may attach more volumes
    VOLUME_DETACHED = auto()  # a VolumeAttachment deleted
    CLAIM_CHANGED = auto()
    VOLUME_CHANGED = auto()
    STORAGE_CLASS_CHANGED = auto()
    STORAGE_CAPACITY_CHANGED = auto()  # a CSIDriver or CSIStorageCapacity added or changed
    METRICS_REFRESHED = auto()  # a policy's snapshot: load thresholds judge nodes anew
    POLICY_CHANGED = auto()

    NODE = NODE_ADDED | NODE_UPDATED
    ASSIGNED_POD = ASSIGNED_POD_ADDED | ASSIGNED_POD_UPDATED | ASSIGNED_POD_DELETED
    VOLUMES = CLAIM_CHANGED | VOLUME_CHANGED | STORAGE_CLASS_CHANGED
    NONE = 0
    ANY = (
        NODE_ADDED
        | NODE_UPDATED
        | NODE_DELETED
        | ASSIGNED_POD_ADDED
        | ASSIGNED_POD_UPDATED
        | ASSIGNED_POD_DELETED
        | ASSIGNED_POD_SCALED_DOWN
        | NAMESPACE_UPDATED
        | CSI_NODE_CHANGED
        | VOLUME_DETACHED
        | CLAIM_CHANGED
        | VOLUME_CHANGED
        | STORAGE_CLASS_CHANGED
        | STORAGE_CAPACITY_CHANGED
        | METRICS_REFRESHED
        | POLICY_CHANGED
    )


@dataclass(frozen=True, slots=True)
class ClusterChange:
    """What one cluster event changed, as the queueing hints read it: the assigned pod it is about (with
    its namespace's labels), or the claim."""

    pod: PodInfo | None = None
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    claim: tuple[str, str] | None = None  # (namespace, name)


# kube's QueueingHintFn: whether the change may make the waiting pod fit, judged for a filter that
# declared the event; a pod no hint of its event's filters speaks for keeps waiting.
QueueingHint = Callable[[PodInfo, ClusterChange], bool]


@dataclass(frozen=True, slots=True)
class Status:
    """A rejection: `reason` is what FailedScheduling counts nodes by (it never names the node);
    `lifted_by` the events that may lift it (the rejecting filter's declaration)."""

    reason: str
    code: Code
    lifted_by: ClusterEvent

    @property
    def eviction_may_help(self) -> bool:
        """Whether evicting pods from the node could lift it: only then is preemption worth assessing."""
        return self.code is Code.UNSCHEDULABLE


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


class FilterPlugin(Protocol):
    """What every filter declares: its name, and the cluster events that may lift its rejections with
    their hints (kube's Plugin and EnqueueExtensions)."""

    @property
    def name(self) -> str:
        """The filter's name in logs; kube's plugin name where there is one."""

    @property
    def events(self) -> ClusterEvent:
        """The cluster events that may lift a rejection of this filter (kube's EventsToRegister)."""

    @property
    def hints(self) -> Mapping[ClusterEvent, QueueingHint]:
        """For some of `events`, which waiting pods a change may help (kube's QueueingHints); an event
        without one wakes every pod the filter rejected."""


class Filter(FilterPlugin, Protocol):
    def concerns(self, pod: PodInfo) -> bool:
        """False when the filter passes every node for `pod` (kube's PreFilter Skip): it is not run."""

    def filter(self, pod: PodInfo, node: NodeInfo, usage: NodeUsage) -> Status | None:
        """None if `pod` may go to `node` with `usage` on it; else why not, naming no node."""


class ClusterFilter(FilterPlugin, Protocol):
    def prepare(self, pod: PodInfo, cache: ClusterCache) -> NodeCheck | Rejection | None:
        """Once per cycle: the check to run on each node, a rejection of the pod, or None when nothing
        about the pod concerns this filter."""


MAX_SCORE: Final = 100


@dataclass(frozen=True, slots=True)
class NodeScores:
    """One scorer's results, in the order of the nodes scored: `raw` as the plugin computes it (None for a
    node the plugin does not score), `scores` normalised to 0..100."""

    raw: list[float | None]
    scores: list[float]


class Scorer(Protocol):
    @property
    def name(self) -> str:
        """kube's plugin name."""

    @property
    def weight(self) -> int:
        """kube's default weight for the plugin."""

    def skips(self, pod: PodInfo, cache: ClusterCache) -> bool:
        """kube's PreScore Skip: True when the pod gives this plugin nothing to prefer, as known before
        the nodes are looked at; `score` is then not called."""

    def score(self, pod: PodInfo, cache: ClusterCache, nodes: Sequence[NodeInfo]) -> NodeScores | None:
        """Every node's score, or None when the pod gives this plugin nothing to prefer."""
