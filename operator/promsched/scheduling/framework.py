"""What a filter says about a node, as kube-scheduler's framework.Status: a code and a reason.

The code tells preemption whether evicting pods from the node could lift the rejection
(Unschedulable) or not (UnschedulableAndUnresolvable). Each filter also declares the cluster events
that can lift its rejections (kube's EventsToRegister); a pod parked as unschedulable goes back to the
queue on those events only, or after the queue's longest wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Flag, StrEnum, auto


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
