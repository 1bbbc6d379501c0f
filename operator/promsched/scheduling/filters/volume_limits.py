"""How many more CSI volumes a node can attach, as kube-scheduler's NodeVolumeLimits plugin (CSILimits).

A node's CSINode says how many volumes each CSI driver can attach to it (spec.drivers[].allocatable
.count). The volumes of the pods on the node are counted per driver, each once however many pods use it;
the pod's volumes not already there are added, and a node where a driver would exceed its count does not
fit: "node(s) exceed max volume count". A volume counts by its PersistentVolume's CSI source (or the CSI
driver a migrated in-tree plugin moved to); a claim not bound yet counts by its StorageClass's
provisioner, as a volume of its own. The node's VolumeAttachments count too, each volume once: a volume
still attached (detaching, or attaching for a pod not seen yet) takes its slot. A node without a CSINode,
or a driver without a count, has no limit.

As kube 1.37 with VolumeLimitScaling (beta, on): a driver whose CSIDriver sets
preventPodSchedulingIfMissing must be installed on the node (listed in its CSINode), or "<driver> CSI
driver is not installed on the node".
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from promsched.scheduling.filters.queueing_hints import hints_of, uses_changed_claim, uses_claims
from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.csi_nodes import MIGRATED_PLUGINS
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache

MAX_VOLUME_COUNT: Final = "node(s) exceed max volume count"
NOT_INSTALLED: Final = "CSI driver is not installed on the node"  # after the driver's name
# kube's EventsToRegister: a CSINode added or allowing more, an assigned pod deleted, a claim added, a
# VolumeAttachment deleted.
EVENTS: Final = (
    ClusterEvent.CSI_NODE_CHANGED
    | ClusterEvent.ASSIGNED_POD_DELETED
    | ClusterEvent.CLAIM_CHANGED
    | ClusterEvent.VOLUME_DETACHED
)
_EXCEEDED: Final = Status(MAX_VOLUME_COUNT, Code.UNSCHEDULABLE, EVENTS)

# (driver, handle, whether the handle stands for a claim not bound yet) -> driver
Volumes = dict[tuple[str, str, bool], str]


def attachable_volumes(pod: PodInfo, cache: ClusterCache) -> Volumes:
    """The CSI volumes `pod`'s claims use, each once. A claim, volume or class missing from the cluster
    is not counted (a missing claim of the pod to place is VolumeRestrictions' rejection)."""
    volumes: Volumes = {}
    for claim in pod.claims:
        info = cache.claims.get((pod.namespace, claim.name))
        if info is None:
            continue
        volume = cache.volumes.get(info.volume_name) if info.volume_name else None
        if volume is not None:
            if volume.csi is not None and volume.csi.driver and volume.csi.handle:
                volumes[(volume.csi.driver, volume.csi.handle, False)] = volume.csi.driver
            continue
        # Not bound, or bound to a volume not in the cache: counted by its class, as a volume of its own.
        storage_class = cache.storage_classes.get(info.storage_class) if info.storage_class else None
        if storage_class is None or not storage_class.provisioner:
            continue
        driver = MIGRATED_PLUGINS.get(storage_class.provisioner, storage_class.provisioner)
        volumes[(driver, f"{pod.namespace}/{claim.name}", True)] = driver
    return volumes


class VolumeLimitsCheck:
    """The pod's volumes against each node's CSINode limits. Pods preemption would evict (and pods
    counted back) are kept aside, as kube's filter sees the node without them."""

    def __init__(self, cache: ClusterCache, volumes: Volumes) -> None:
        self.cache = cache
        self.volumes = volumes
        self.drivers = frozenset(volumes.values())
        # Drivers whose CSIDriver says pods may not go where they are not installed.
        self.required = frozenset(
            driver
            for driver in self.drivers
            if (info := cache.csi_drivers.get(driver)) is not None and info.prevent_pod_scheduling_if_missing
        )
        self.removed: set[str] = set()
        self.added: dict[str, dict[str, PodInfo]] = {}

    def check(self, node: NodeInfo) -> Status | None:
        csi_node = self.cache.csi_nodes.get(node.name)
        for driver in sorted(self.required):
            if csi_node is None or driver not in csi_node.drivers:
                return _not_installed(driver)
        if csi_node is None or self.drivers.isdisjoint(csi_node.limits):
            return None
        attached: Volumes = {}
        for pod in self._pods_on(node.name):
            attached.update(attachable_volumes(pod, self.cache))
        in_use = Counter(attached.values())
        # Attachments no pod's volume explains (kube's getNodeVolumeAttachmentInfo: CSI volumes only).
        for attachment in self.cache.node_attachments.get(node.name, {}).values():
            volume = self.cache.volumes.get(attachment.volume) if attachment.attacher else None
            csi = None if volume is None or volume.csi is None or volume.csi.translated else volume.csi
            if csi is not None and (attachment.attacher, csi.handle, False) not in attached:
                in_use[attachment.attacher] += 1
        adding = Counter(driver for volume, driver in self.volumes.items() if volume not in attached)
        for driver, count in adding.items():
            limit = csi_node.limits.get(driver)
            if limit is not None and in_use[driver] + count > limit:
                return _EXCEEDED
        return None

    def _pods_on(self, node: str) -> Iterable[PodInfo]:
        for uid, pod in self.cache.claim_pods.get(node, {}).items():
            if uid not in self.removed:
                yield pod
        yield from self.added.get(node, {}).values()

    def remove_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        added = self.added.get(node.name, {})
        if added.pop(pod.uid, None) is None:
            self.removed.add(pod.uid)

    def add_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        if pod.uid in self.removed:
            self.removed.discard(pod.uid)
        elif pod.claims:
            self.added.setdefault(node.name, {})[pod.uid] = pod


@functools.cache
def _not_installed(driver: str) -> Status:
    return Status(f"{driver} {NOT_INSTALLED}", Code.UNSCHEDULABLE, EVENTS)


class NodeVolumeLimits:
    name = "NodeVolumeLimits"
    events = EVENTS
    hints = hints_of(
        (ClusterEvent.CSI_NODE_CHANGED, uses_claims),
        (ClusterEvent.CLAIM_CHANGED, uses_changed_claim),
        (ClusterEvent.VOLUME_DETACHED, uses_claims),
    )

    def prepare(self, pod: PodInfo, cache: ClusterCache) -> VolumeLimitsCheck | None:
        if not pod.claims:
            return None  # kube's PreFilter Skip: no claim-backed volume
        volumes = attachable_volumes(pod, cache)
        return VolumeLimitsCheck(cache, volumes) if volumes else None
