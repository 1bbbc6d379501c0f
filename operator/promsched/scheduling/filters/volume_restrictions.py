"""ReadWriteOncePod claims already in use, as kube-scheduler's VolumeRestrictions plugin.

A claim with the ReadWriteOncePod access mode may be used by one pod at a time: while a pod on any node
uses it, no node fits another pod naming it. (The plugin's other check, inline disks mounted by two
pods, concerns volume types promsched refuses; see `PodInfo.unsupported`.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from promsched.scheduling.filters.queueing_hints import hints_of, uses_changed_claim
from promsched.scheduling.framework import ClusterEvent, Code, Rejection, Status
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.volumes import READ_WRITE_ONCE_POD

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache

CLAIM_IN_USE: Final = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)


EVENTS: Final = ClusterEvent.ASSIGNED_POD_DELETED | ClusterEvent.CLAIM_CHANGED
_CLAIM_IN_USE: Final = Status(CLAIM_IN_USE, Code.UNSCHEDULABLE, EVENTS)


def claim_not_found(name: str) -> Rejection:
    return Rejection(f'persistentvolumeclaim "{name}" not found', ClusterEvent.CLAIM_CHANGED)


class ClaimInUseCheck:
    def __init__(self, pod: PodInfo, exclusive: frozenset[str], users: int) -> None:
        self.pod = pod
        self.exclusive = exclusive  # the pod's ReadWriteOncePod claims
        self.users = users  # pods already using one of them

    def check(self, node: NodeInfo) -> Status | None:
        return _CLAIM_IN_USE if self.users > 0 else None

    def _update(self, other: PodInfo, delta: int) -> None:
        if other.namespace == self.pod.namespace:
            self.users += delta * sum(
                1 for claim in other.claims if not claim.ephemeral and claim.name in self.exclusive
            )

    def remove_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        self._update(pod, -1)

    def add_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        self._update(pod, 1)


class VolumeRestrictions:
    name = "VolumeRestrictions"
    events = EVENTS
    hints = hints_of(
        (ClusterEvent.CLAIM_CHANGED, uses_changed_claim),
    )

    def prepare(self, pod: PodInfo, cache: ClusterCache) -> ClaimInUseCheck | Rejection | None:
        exclusive = set()
        for claim in pod.claims:
            if claim.ephemeral:
                continue
            info = cache.claims.get((pod.namespace, claim.name))
            if info is None:
                return claim_not_found(claim.name)
            if READ_WRITE_ONCE_POD in info.access_modes:
                exclusive.add(claim.name)
        users = sum(cache.claim_users.get((pod.namespace, name), 0) for name in exclusive)
        return ClaimInUseCheck(pod, frozenset(exclusive), users) if users else None
