"""Which volumes a pod's claims would get on a node, as kube-scheduler's volume binder finds them.

Per pod and cycle (`PodVolumeClaims`, kube's GetPodVolumeClaims): the claims already bound, and those
of a WaitForFirstConsumer class still unbound, with the volumes of their classes. Per node
(`find_pod_volumes`, kube's FindPodVolumes): each bound claim's volume must be reachable from the node;
each unbound claim gets the smallest available volume that fits it there (static binding), or else
must be provisioned there: its class must have a provisioner, allow the node's topology, and, where
its CSI driver publishes storage capacity, have room for it in a segment that includes the node.

Claims and volumes are read as the cache assumes them (`ClusterCache.claim`, `.volume`), so a volume
chosen for a pod whose binding is under way is not offered to the next one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from promsched.scheduling.framework import ClusterEvent, Code, Status
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.volumes import ClaimInfo, VolumeInfo

if TYPE_CHECKING:
    from promsched.scheduling.cluster.caches import ClusterCache

# kube's ConflictReasons, in the order kube lists them for one node (kube-scheduler 1.37's words: the
# node conflict once read "node(s) had volume node affinity conflict").
NODE_CONFLICT: Final = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
NOT_ENOUGH_SPACE: Final = "node(s) did not have enough free storage"
VOLUME_MISSING: Final = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"

# kube's VolumeBinding EventsToRegister: nodes added or relabelled, claims, volumes and classes added
# or changed, CSI drivers and storage capacities changed.
EVENTS: Final = ClusterEvent.NODE | ClusterEvent.VOLUMES | ClusterEvent.STORAGE_CAPACITY_CHANGED


def _status(reason: str) -> Status:
    return Status(reason, Code.UNRESOLVABLE, EVENTS)


_NODE_CONFLICT: Final = _status(NODE_CONFLICT)
_BIND_CONFLICT: Final = _status(BIND_CONFLICT)
_NOT_ENOUGH_SPACE: Final = _status(NOT_ENOUGH_SPACE)
_VOLUME_MISSING: Final = _status(VOLUME_MISSING)


@dataclass(frozen=True, slots=True)
class StaticBinding:
    claim: ClaimInfo
    volume: VolumeInfo


@dataclass(frozen=True, slots=True)
class VolumePlan:
    """What the pod's claims need on the chosen node: volumes to bind them to, claims to provision."""

    bindings: tuple[StaticBinding, ...] = ()
    provisions: tuple[ClaimInfo, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.bindings or self.provisions)


@dataclass(frozen=True, slots=True)
class PodVolumeClaims:
    """A pod's claims as the cycle starts: `bound` ones, and `delayed` ones (a WaitForFirstConsumer
    class, no volume named) with the volumes of their classes."""

    bound: tuple[ClaimInfo, ...] = ()
    delayed: tuple[ClaimInfo, ...] = ()
    volumes_by_class: Mapping[str, tuple[VolumeInfo, ...]] = field(default_factory=dict)


def volumes_by_class(cache: ClusterCache, classes: Iterable[str]) -> dict[str, tuple[VolumeInfo, ...]]:
    """The volumes (as assumed) of each class, by the class each names (kube's PV cache ListPVs)."""
    wanted = set(classes)
    found: dict[str, list[VolumeInfo]] = {name: [] for name in wanted}
    for name in cache.volumes:
        volume = cache.volume(name)
        if volume is not None and volume.storage_class in wanted:
            found[volume.storage_class].append(volume)
    return {name: tuple(volumes) for name, volumes in found.items()}


def find_pod_volumes(claims: PodVolumeClaims, node: NodeInfo, cache: ClusterCache) -> VolumePlan | Status:
    """The pod's plan on `node`, or why its claims cannot be satisfied there. kube lists every reason
    that applies; the first of them in kube's order is kept, as for the other filters."""
    reasons: list[Status] = []
    for claim in claims.bound:
        volume = cache.volumes.get(claim.volume_name)
        if volume is None:
            reasons.append(_VOLUME_MISSING)
            break
        if not volume.reachable_from(node.labels):
            reasons.append(_NODE_CONFLICT)
            break
    plan = VolumePlan()
    if claims.delayed:
        found = _plan_unbound(claims, node, cache)
        if isinstance(found, Status):
            reasons.append(found)
        else:
            plan = found
    if reasons:
        order = (_NODE_CONFLICT, _BIND_CONFLICT, _NOT_ENOUGH_SPACE, _VOLUME_MISSING)
        return min(reasons, key=order.index)
    return plan


def _plan_unbound(claims: PodVolumeClaims, node: NodeInfo, cache: ClusterCache) -> VolumePlan | Status:
    to_match: list[ClaimInfo] = []
    to_provision: list[ClaimInfo] = []
    for claim in claims.delayed:
        if claim.selected_node is not None:
            if claim.selected_node != node.name:
                return _BIND_CONFLICT  # being provisioned for another node
            to_provision.append(claim)
        else:
            to_match.append(claim)
    bindings: list[StaticBinding] = []
    chosen: set[str] = set()
    # The smallest claims first, each taking the smallest volume that fits (kube's byPVCSize).
    for claim in sorted(to_match, key=lambda claim: claim.requested_storage or 0):
        volume = matching_volume(claim, claims.volumes_by_class.get(claim.storage_class, ()), node, chosen)
        if volume is None:
            to_provision.append(claim)
            continue
        chosen.add(volume.name)
        bindings.append(StaticBinding(claim, volume))
    for claim in to_provision:
        problem = _provision_problem(claim, node, cache)
        if problem is not None:
            return problem
    return VolumePlan(tuple(bindings), tuple(to_provision))


def matching_volume(
    claim: ClaimInfo, volumes: Iterable[VolumeInfo], node: NodeInfo, excluded: set[str]
) -> VolumeInfo | None:
    """The volume `claim` would be bound to on `node` (kube's FindMatchingVolume on the scheduler's
    path): one already pre-bound to the claim if the node reaches it, else the smallest available
    volume of its class that holds its request, with its volume mode, attributes class and access
    modes, that its selector matches and the node reaches."""
    smallest: VolumeInfo | None = None
    requested = claim.requested_storage or 0
    for volume in volumes:
        if volume.name in excluded:
            continue
        pre_bound = volume.claim_ref is not None and volume.claim_ref.names(claim)
        if volume.claim_ref is not None and not pre_bound:
            continue
        if volume.capacity < requested or volume.volume_mode != claim.volume_mode or volume.deleting:
            continue
        reachable = volume.reachable_from(node.labels)
        if pre_bound:
            return volume if reachable else None
        if (
            not volume.available
            or (claim.selector is not None and not claim.selector.matches(volume.labels))
            or volume.storage_class != claim.storage_class
            or volume.attributes_class != claim.attributes_class
            or not reachable
            or not claim.access_modes <= volume.access_modes
        ):
            continue
        if smallest is None or volume.capacity < smallest.capacity:
            smallest = volume
    return smallest


def _provision_problem(claim: ClaimInfo, node: NodeInfo, cache: ClusterCache) -> Status | None:
    """Why `claim` cannot be provisioned for `node` (kube's checkVolumeProvisions), or None."""
    storage_class = cache.storage_classes.get(claim.storage_class)
    if storage_class is None or not storage_class.provisions or not storage_class.allows(node.labels):
        return _BIND_CONFLICT
    if claim.requested_storage is None:
        return None  # no size to check
    driver = cache.csi_drivers.get(storage_class.provisioner)
    if driver is None or not driver.storage_capacity:
        return None  # not a CSI driver, or one that publishes no capacity: nothing limits it
    for capacity in cache.storage_capacities.values():
        if capacity.holds(storage_class.name, claim.requested_storage, node.labels):
            return None
    return _NOT_ENOUGH_SPACE
