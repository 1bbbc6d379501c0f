"""The kinds only some filters read, as the intake applies them to the cache: PersistentVolumes and their
claims, StorageClasses, CSINodes, VolumeAttachments, CSIDrivers, CSIStorageCapacities and
PodDisruptionBudgets. A change gives the parked pods it may help another try, as kube's queueing hints
do (pods with claims, for the storage kinds); the intake (`intake.py`) lists and watches them and
guards their versions.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.framework import ClusterChange, ClusterEvent
from promsched.scheduling.objects.csi_nodes import CSINodeInfo, VolumeAttachmentInfo
from promsched.scheduling.objects.disruption_budgets import DisruptionBudget
from promsched.scheduling.objects.storage_capacities import CSIDriverInfo, StorageCapacityInfo
from promsched.scheduling.objects.volumes import ClaimInfo, StorageClassInfo, VolumeInfo
from promsched.scheduling.queues import SchedulingQueue

logger = logging.getLogger(__name__)


class SecondaryKinds:
    """Applies one object's state (deleted or not) of each of these kinds to `cache`, waking `queue`."""

    def __init__(self, cache: ClusterCache, queue: SchedulingQueue) -> None:
        self.cache = cache
        self.queue = queue

    def apply_claim(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        metadata = obj.get("metadata", {})
        namespace, name = metadata.get("namespace", ""), metadata.get("name", "")
        if deleted:
            self.cache.remove_claim(namespace, name)
            return
        if self.cache.upsert_claim(ClaimInfo.from_object(obj)):
            change = ClusterChange(claim=(namespace, name))
            self.queue.move_all_to_active("claim changed", ClusterEvent.CLAIM_CHANGED, change)

    def apply_attachment(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = obj.get("metadata", {}).get("name", "")
        if not deleted:
            try:
                self.cache.upsert_attachment(VolumeAttachmentInfo.from_object(obj))
                return
            except ValueError as error:
                logger.warning("VolumeAttachment %s ignored: %s", name, error)
        if self.cache.remove_attachment(name):
            # kube's hint: a volume detached may make room for a pod with claims.
            self.queue.move_all_to_active("volume detached", ClusterEvent.VOLUME_DETACHED)

    def apply_csi_node(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = obj.get("metadata", {}).get("name", "")
        if deleted:
            self.cache.remove_csi_node(name)
            return
        try:
            csi_node = CSINodeInfo.from_object(obj)
        except ValueError as error:
            logger.warning("CSINode %s ignored (its node has no attach limits): %s", name, error)
            self.cache.remove_csi_node(name)
            return
        if self.cache.upsert_csi_node(csi_node):
            self.queue.move_all_to_active("CSINode changed", ClusterEvent.CSI_NODE_CHANGED)

    def apply_volume(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = obj.get("metadata", {}).get("name", "")
        if deleted:
            self.cache.remove_volume(name)
        elif self.cache.upsert_volume(VolumeInfo.from_object(obj)):
            self.queue.move_all_to_active("volume changed", ClusterEvent.VOLUME_CHANGED)

    def apply_storage_class(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = obj.get("metadata", {}).get("name", "")
        if deleted:
            self.cache.remove_storage_class(name)
        elif self.cache.upsert_storage_class(StorageClassInfo.from_object(obj)):
            self.queue.move_all_to_active("storage class changed", ClusterEvent.STORAGE_CLASS_CHANGED)

    def apply_csi_driver(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = obj.get("metadata", {}).get("name", "")
        if deleted:
            self.cache.remove_csi_driver(name)
        elif self.cache.upsert_csi_driver(CSIDriverInfo.from_object(obj)):
            self._storage_capacity_changed()

    def apply_storage_capacity(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        metadata = obj.get("metadata", {})
        if deleted:
            self.cache.remove_storage_capacity(metadata.get("namespace", ""), metadata.get("name", ""))
        elif self.cache.upsert_storage_capacity(StorageCapacityInfo.from_object(obj)):
            self._storage_capacity_changed()

    def _storage_capacity_changed(self) -> None:
        self.queue.move_all_to_active("storage capacity changed", ClusterEvent.STORAGE_CAPACITY_CHANGED)

    def apply_budget(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        # Read by preemption only, which no event requeues for (kube's DefaultPreemption registers none).
        metadata = obj.get("metadata", {})
        if deleted:
            self.cache.remove_budget(metadata.get("namespace", ""), metadata.get("name", ""))
            return
        try:
            self.cache.upsert_budget(DisruptionBudget.from_object(obj))
        except ValueError as error:
            logger.warning(
                "PodDisruptionBudget %s/%s ignored: %s",
                metadata.get("namespace"),
                metadata.get("name"),
                error,
            )
