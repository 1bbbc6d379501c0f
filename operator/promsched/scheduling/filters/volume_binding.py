"""Claims and the volumes they are bound to, as kube-scheduler's VolumeBinding plugin, for volumes
that are bound already.

Per cycle, as kube's PreFilter: every claim the pod uses must exist (an ephemeral volume's claim must
have been created for this pod), not be lost or being deleted, and be bound; a claim still unbound
whose class binds at once waits for the PersistentVolume controller. A claim whose StorageClass binds
at the first consumer (WaitForFirstConsumer) needs the scheduler to pick or provision its volume:
promsched does not, and says so naming the claim rather than placing the pod. A node then fits when
each bound volume exists and its node affinity admits the node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from promsched.scheduling.filters.checks import PodIndependentCheck, Rejection
from promsched.scheduling.filters.statuses import ClusterEvent, Code, Status
from promsched.scheduling.filters.volume_restrictions import claim_not_found
from promsched.scheduling.nodes import NodeInfo
from promsched.scheduling.pods import PodClaim, PodInfo
from promsched.scheduling.volumes import WAIT_FOR_FIRST_CONSUMER, ClaimInfo, VolumeInfo

if TYPE_CHECKING:
    from promsched.scheduling.caches import ClusterCache

NODE_CONFLICT: Final = "node(s) had volume node affinity conflict"
VOLUME_MISSING: Final = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"
EVENTS: Final = ClusterEvent.NODE | ClusterEvent.VOLUMES
_VOLUME_MISSING: Final = Status(VOLUME_MISSING, Code.UNRESOLVABLE, EVENTS)
_NODE_CONFLICT: Final = Status(NODE_CONFLICT, Code.UNRESOLVABLE, EVENTS)


def _rejected(message: str) -> Rejection:
    return Rejection(message, EVENTS)


class BoundVolumesCheck(PodIndependentCheck):
    def __init__(self, volumes: list[VolumeInfo | None]) -> None:
        self.volumes = volumes  # None: the claim's volume is not in the cluster

    def check(self, node: NodeInfo) -> Status | None:
        for volume in self.volumes:
            if volume is None:
                return _VOLUME_MISSING
            if not volume.reachable_from(node.labels):
                return _NODE_CONFLICT
        return None


def waiting_for_first_consumer(claim: PodClaim, info: ClaimInfo) -> Rejection:
    return _rejected(
        f'{claim.path}: persistentvolumeclaim "{claim.name}" is unbound and its StorageClass '
        f'"{info.storage_class}" binds it to a volume at the first pod that uses it '
        f"(volumeBindingMode {WAIT_FOR_FIRST_CONSUMER}); binding or provisioning volumes is not supported "
        "by promsched yet",
    )


class VolumeBinding:
    name = "VolumeBinding"
    events = EVENTS

    def prepare(self, pod: PodInfo, cache: ClusterCache) -> BoundVolumesCheck | Rejection | None:
        if not pod.claims:
            return None
        claims: list[tuple[PodClaim, ClaimInfo]] = []
        for claim in pod.claims:
            info = cache.claims.get((pod.namespace, claim.name))
            problem = _unusable(pod, claim, info)
            if problem is not None:
                return problem
            assert info is not None
            claims.append((claim, info))
        volumes: list[VolumeInfo | None] = []
        waiting = None
        for claim, info in claims:
            if info.bound:
                volumes.append(cache.volumes.get(info.volume_name))
                continue
            storage_class = cache.storage_classes.get(info.storage_class)
            binds_late = storage_class is not None and storage_class.wait_for_first_consumer
            # A claim that names its volume but is not fully bound yet waits for the controller too.
            if not binds_late or info.volume_name:
                return _rejected(UNBOUND_IMMEDIATE)
            waiting = waiting or waiting_for_first_consumer(claim, info)
        return waiting or BoundVolumesCheck(volumes)


def _unusable(pod: PodInfo, claim: PodClaim, info: ClaimInfo | None) -> Rejection | None:
    """Why the claim cannot be used at all, in kube's words; None when it can."""
    name = claim.name
    if info is None:
        if claim.ephemeral:
            return _rejected(
                f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"',
            )
        return claim_not_found(name)
    if info.lost:
        return _rejected(
            f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{info.volume_name}"',
        )
    if info.deleting:
        return _rejected(f'persistentvolumeclaim "{name}" is being deleted')
    if claim.ephemeral and info.controller_uid != pod.uid:
        owner = f"{pod.namespace}/{pod.name}"
        return _rejected(
            f"PVC {pod.namespace}/{name} was not created for pod {owner} (pod is not owner)",
        )
    return None
