"""The zones and regions of the volumes a pod's claims are bound to, as kube-scheduler's VolumeZone
plugin: a volume labelled with a zone (or several, ``a__b``) or a region is reachable only from nodes
labelled with one of them. A node with no zone or region label at all fits (a cluster without zones).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from promsched.scheduling.filters.queueing_hints import hints_of, uses_changed_claim, uses_claims
from promsched.scheduling.filters.volume_restrictions import claim_not_found
from promsched.scheduling.framework import ClusterEvent, Code, PodIndependentCheck, Rejection, Status
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.volumes import VolumeInfo

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache

ZONE_CONFLICT: Final = "node(s) had no available volume zone"
EVENTS: Final = ClusterEvent.NODE | ClusterEvent.VOLUMES
_ZONE_CONFLICT: Final = Status(ZONE_CONFLICT, Code.UNRESOLVABLE, EVENTS)


def _rejected(message: str) -> Rejection:
    return Rejection(message, EVENTS)


class VolumeZoneCheck(PodIndependentCheck):
    def __init__(self, volumes: list[VolumeInfo]) -> None:
        self.volumes = volumes

    def check(self, node: NodeInfo) -> Status | None:
        if all(volume.in_zone_of(node.labels) for volume in self.volumes):
            return None
        return _ZONE_CONFLICT


class VolumeZone:
    name = "VolumeZone"
    events = EVENTS
    hints = hints_of(
        (ClusterEvent.CLAIM_CHANGED, uses_changed_claim),
        (ClusterEvent.VOLUME_CHANGED, uses_claims),
        (ClusterEvent.STORAGE_CLASS_CHANGED, uses_claims),
    )

    def prepare(self, pod: PodInfo, cache: ClusterCache) -> VolumeZoneCheck | Rejection | None:
        zoned = []
        for claim in pod.claims:
            if claim.ephemeral:
                continue  # as kube: only claims the pod names
            info = cache.claims.get((pod.namespace, claim.name))
            if info is None:
                return claim_not_found(claim.name)
            if not info.volume_name:
                if not info.storage_class:
                    return _rejected("PersistentVolumeClaim had no pv name and storageClass name")
                storage_class = cache.storage_classes.get(info.storage_class)
                if storage_class is None:
                    return _rejected(
                        f'storageclass.storage.k8s.io "{info.storage_class}" not found',
                    )
                if storage_class.wait_for_first_consumer:
                    continue  # its zone is chosen when it is bound, which VolumeBinding refuses
                return _rejected("PersistentVolume had no name")
            volume = cache.volumes.get(info.volume_name)
            if volume is None:
                return _rejected(f'persistentvolume "{info.volume_name}" not found')
            if volume.zones:
                zoned.append(volume)
        return VolumeZoneCheck(zoned) if zoned else None
