"""Claims and the volumes they are or would be bound to, as kube-scheduler's VolumeBinding plugin.

Per cycle, as kube's PreFilter: every claim the pod uses must exist (an ephemeral volume's claim must
have been created for this pod), not be lost or being deleted; a claim still unbound whose class binds
at once (or that names its volume but is not bound yet) waits for the PersistentVolume controller.
A claim whose class binds at the first consumer (WaitForFirstConsumer) is the scheduler's to bind.
Each node is then checked as kube's Filter (see `volume_binding_plans.find_pod_volumes`): bound
volumes must be reachable from it, and each unbound claim must find an available volume there or be
provisionable there. `plan_for` gives what the chosen node needs done before the pod is bound (kube's
Reserve and PreBind, see `prebinding`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from promsched.scheduling.filters.queueing_hints import hints_of, uses_changed_claim, uses_claims
from promsched.scheduling.filters.volume_binding_plans import (
    EVENTS,
    PodVolumeClaims,
    VolumePlan,
    find_pod_volumes,
    volumes_by_class,
)
from promsched.scheduling.filters.volume_restrictions import claim_not_found
from promsched.scheduling.framework import ClusterEvent, PodIndependentCheck, Rejection, Status
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pod_volumes import PodClaim
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.volumes import ClaimInfo

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache

UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"


def _rejected(message: str) -> Rejection:
    return Rejection(message, EVENTS)


class VolumeBindingCheck(PodIndependentCheck):
    def __init__(self, claims: PodVolumeClaims, cache: ClusterCache) -> None:
        self.claims = claims
        self.cache = cache

    def check(self, node: NodeInfo) -> Status | None:
        found = find_pod_volumes(self.claims, node, self.cache)
        return found if isinstance(found, Status) else None


class VolumeBinding:
    name = "VolumeBinding"
    events = EVENTS
    hints = hints_of(
        (ClusterEvent.CLAIM_CHANGED, uses_changed_claim),
        (ClusterEvent.VOLUME_CHANGED, uses_claims),
        (ClusterEvent.STORAGE_CLASS_CHANGED, uses_claims),
        (ClusterEvent.STORAGE_CAPACITY_CHANGED, uses_claims),
    )

    def prepare(self, pod: PodInfo, cache: ClusterCache) -> VolumeBindingCheck | Rejection | None:
        claims = pod_volume_claims(pod, cache)
        if claims is None or isinstance(claims, Rejection):
            return claims
        return VolumeBindingCheck(claims, cache)


def pod_volume_claims(pod: PodInfo, cache: ClusterCache) -> PodVolumeClaims | Rejection | None:
    """The pod's claims sorted as kube's GetPodVolumeClaims does; a rejection when one cannot be used
    or must be bound by the controller first; None for a pod without claims."""
    if not pod.claims:
        return None
    infos: dict[str, ClaimInfo] = {}
    for claim in pod.claims:
        info = cache.claim(pod.namespace, claim.name)
        problem = _unusable(pod, claim, info)
        if problem is not None:
            return problem
        assert info is not None
        # A claim two of the pod's volumes use is bound once (kube would choose two volumes for it).
        infos.setdefault(claim.name, info)
    bound: list[ClaimInfo] = []
    delayed: list[ClaimInfo] = []
    for info in infos.values():
        if info.bound:
            bound.append(info)
            continue
        storage_class = cache.storage_classes.get(info.storage_class) if info.storage_class else None
        # A claim that names its volume but is not fully bound yet waits for the controller too.
        if storage_class is None or not storage_class.wait_for_first_consumer or info.volume_name:
            return _rejected(UNBOUND_IMMEDIATE)
        delayed.append(info)
    classes = {info.storage_class for info in delayed}
    return PodVolumeClaims(tuple(bound), tuple(delayed), volumes_by_class(cache, classes))


def plan_for(pod: PodInfo, cache: ClusterCache, node: NodeInfo) -> VolumePlan:
    """What binding the pod's claims on `node` takes (empty when they are all bound): the node is one
    the filter let through in this same cycle."""
    claims = pod_volume_claims(pod, cache)
    if not isinstance(claims, PodVolumeClaims) or not claims.delayed:
        return VolumePlan()
    found = find_pod_volumes(claims, node, cache)
    return VolumePlan() if isinstance(found, Status) else found


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
