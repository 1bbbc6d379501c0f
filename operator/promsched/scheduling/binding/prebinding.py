"""Binding a pod's volumes before the pod, as kube-scheduler's VolumeBinding Reserve and PreBind.

Reserve (`assume`, in the scheduling cycle): the volumes chosen for the pod's claims are assumed
pre-bound to them and the claims to provision assumed to carry the chosen node, so the next pods'
cycles neither offer those volumes again nor provision those claims elsewhere.

PreBind (`bind`, in the binding cycle, never holding up other pods): each chosen volume gets the
claim in spec.claimRef (the PersistentVolume controller then binds both ways), each claim to provision
gets the `volume.kubernetes.io/selected-node` annotation (its provisioner creates a volume reachable
from the node). Then, as kube, the claims are checked once a second until every one is bound, for at
most the bind timeout (kube's bindTimeoutSeconds, 600 s). A write refused (a conflict: the object
changed since it was read), a provisioner giving up (it removes the selected node), a volume unbound
again, the pod deleted or the timeout: the assumptions are dropped, what was written is taken back
where it still stands and nothing completed the binding, and the error names the claim.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final

import aiohttp

from promsched.kube import volume_requests
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError, SupportsSend
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.filters.volume_binding_plans import StaticBinding, VolumePlan
from promsched.scheduling.objects.fields import version_of
from promsched.scheduling.objects.volumes import (
    BOUND_BY_CONTROLLER_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
    ClaimInfo,
    ClaimRef,
)

logger = logging.getLogger(__name__)

# kube's VolumeBindingArgs.bindTimeoutSeconds default, and how often kube checks the claims meanwhile.
BIND_TIMEOUT_SECONDS: Final = 600.0
POLL_INTERVAL: Final = 1.0
# kube's words for an error of a PreBind plugin, before the binder's own.
PREBIND_FAILED: Final = 'running PreBind plugin "VolumeBinding": binding volumes: '


class VolumeBindingFailed(Exception):
    """The pod's volumes could not be bound; `message` is what FailedScheduling says (kube's)."""

    def __init__(self, detail: str) -> None:
        super().__init__(PREBIND_FAILED + detail)
        self.message = PREBIND_FAILED + detail


def _about(claim: ClaimInfo, detail: str) -> VolumeBindingFailed:
    return VolumeBindingFailed(f'persistentvolumeclaim "{claim.key}": {detail}')


@dataclass(slots=True)
class _VolumeWrite:
    binding: StaticBinding
    version: int  # the volume's resourceVersion once written: older states are not yet ours
    wrote_ref: bool
    wrote_annotation: bool


@dataclass(slots=True)
class _ClaimWrite:
    claim: ClaimInfo
    version: int
    wrote: bool


@dataclass(slots=True)
class _Writes:
    volumes: list[_VolumeWrite] = field(default_factory=list)
    claims: list[_ClaimWrite] = field(default_factory=list)


class VolumeBinder:
    """Binds pods' volumes through `sender` (the client's rate limit counts these writes), reading the
    outcome from `cache`; waits with `sleep`, tells time by `clock`."""

    def __init__(
        self,
        sender: SupportsSend,
        cache: ClusterCache,
        *,
        timeout: float = BIND_TIMEOUT_SECONDS,
        poll_interval: float = POLL_INTERVAL,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sender = sender
        self.cache = cache
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.sleep = sleep
        self.clock = clock

    # ----- Reserve ----------------------------------------------------------------------------------

    def assume(self, plan: VolumePlan, node: str) -> None:
        for binding in plan.bindings:
            claim, volume = binding.claim, binding.volume
            self.cache.assumed_volumes[volume.name] = replace(
                volume, claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid), bound_by_controller=True
            )
        for claim in plan.provisions:
            self.cache.assumed_claims[(claim.namespace, claim.name)] = replace(claim, selected_node=node)

    def revert(self, plan: VolumePlan) -> None:
        for binding in plan.bindings:
            self.cache.assumed_volumes.pop(binding.volume.name, None)
        for claim in plan.provisions:
            self.cache.assumed_claims.pop((claim.namespace, claim.name), None)

    # ----- PreBind ----------------------------------------------------------------------------------

    async def bind(self, node: str, plan: VolumePlan, live: Callable[[], bool]) -> None:
        """Write the plan and wait until every claim is bound; `live` tells whether the pod still waits
        to be bound. Raises VolumeBindingFailed, having reverted and taken back what it did."""
        writes = _Writes()
        try:
            await self._write(node, plan, writes)
            await self._wait(node, writes, live)
        except VolumeBindingFailed:
            self.revert(plan)
            await self._take_back(node, writes)
            raise
        self.revert(plan)  # the cache shows the claims bound now

    async def _write(self, node: str, plan: VolumePlan, writes: _Writes) -> None:
        for binding in plan.bindings:
            claim, volume = binding.claim, binding.volume
            ref = volume.claim_ref
            wrote_ref = ref != ClaimRef(claim.namespace, claim.name, claim.uid)
            # kube marks a volume it binds as bound by a controller, unless a user pre-bound it.
            wrote_annotation = not (ref is not None and ref.names(claim)) and not volume.bound_by_controller
            version = volume.resource_version
            if wrote_ref or wrote_annotation:
                claim_ref = {
                    "kind": "PersistentVolumeClaim",
                    "apiVersion": "v1",
                    "namespace": claim.namespace,
                    "name": claim.name,
                    "uid": claim.uid,
                    "resourceVersion": str(claim.resource_version),
                }
                annotations = {BOUND_BY_CONTROLLER_ANNOTATION: "yes"} if wrote_annotation else {}
                request = volume_requests.bind_volume(volume.name, version, claim_ref, annotations)
                version = await self._send(claim, request)
            writes.volumes.append(_VolumeWrite(binding, version, wrote_ref, wrote_annotation))
        for claim in plan.provisions:
            current = self.cache.claims.get((claim.namespace, claim.name), claim)
            wrote = current.selected_node != node
            version = claim.resource_version
            if wrote:
                request = volume_requests.select_node(
                    claim.namespace, claim.name, version, SELECTED_NODE_ANNOTATION, node
                )
                version = await self._send(claim, request)
            writes.claims.append(_ClaimWrite(claim, version, wrote))

    async def _send(self, claim: ClaimInfo, request: Request) -> int:
        """Send a write for `claim`; the written object's resourceVersion."""
        try:
            written: Any = await self.sender.send(request)
        except ApiError as error:
            raise _about(claim, error.message or str(error)) from None
        except (aiohttp.ClientError, TimeoutError) as error:
            raise _about(claim, str(error) or type(error).__name__) from None
        metadata = written.get("metadata") if isinstance(written, dict) else None
        return version_of(metadata or {}) or 0

    async def _wait(self, node: str, writes: _Writes, live: Callable[[], bool]) -> None:
        deadline = self.clock() + self.timeout
        while True:
            await self.sleep(self.poll_interval)
            waiting = self._unbound(node, writes, live)
            if waiting is None:
                return
            if self.clock() >= deadline:
                raise VolumeBindingFailed(
                    f'timed out waiting for persistentvolumeclaim "{waiting.key}" to be bound'
                )

    def _unbound(self, node: str, writes: _Writes, live: Callable[[], bool]) -> ClaimInfo | None:
        """The first claim not bound yet, None when all are (kube's checkBindings); raises when the
        binding can no longer complete."""
        if not live():
            raise VolumeBindingFailed("pod does not exist any more")
        target = self.cache.nodes.get(node)
        if target is None:
            raise VolumeBindingFailed(f'failed to get node "{node}": node "{node}" not found')
        waiting: ClaimInfo | None = None
        for write in writes.volumes:
            claim, name = write.binding.claim, write.binding.volume.name
            volume = self.cache.volumes.get(name)
            current = self.cache.claims.get((claim.namespace, claim.name))
            if volume is None or current is None:
                raise _about(claim, f'failed to check binding: persistentvolume "{name}" or claim gone')
            if volume.resource_version < write.version:
                waiting = waiting or claim  # the watch has not shown our write yet
                continue
            if not volume.reachable_from(target.labels):
                raise _about(claim, f'pv "{name}" node affinity doesn\'t match node "{node}"')
            if volume.claim_ref is None or not volume.claim_ref.uid:
                raise _about(claim, f'ClaimRef got reset for pv "{name}"')
            if not current.bound:
                waiting = waiting or claim
        for claim_write in writes.claims:
            claim = claim_write.claim
            current = self.cache.claims.get((claim.namespace, claim.name))
            if current is None:
                raise _about(claim, "failed to check provisioning pvc: it is gone")
            if current.resource_version < claim_write.version:
                waiting = waiting or claim
                continue
            if current.selected_node != node:
                # The provisioner removes the selected node when it cannot provision there.
                raise VolumeBindingFailed(f'provisioning failed for PVC "{claim.name}"')
            if current.volume_name:
                volume = self.cache.volumes.get(current.volume_name)
                if volume is None:
                    waiting = waiting or claim  # not seen yet
                    continue
                if not volume.reachable_from(target.labels):
                    raise _about(claim, f'pv "{volume.name}" node affinity doesn\'t match node "{node}"')
            if not current.bound:
                waiting = waiting or claim
        return waiting

    # ----- taking writes back -----------------------------------------------------------------------

    async def _take_back(self, node: str, writes: _Writes) -> None:
        """Undo what this binding wrote, where nothing has completed the binding since."""
        for write in writes.volumes:
            claim, name = write.binding.claim, write.binding.volume.name
            current = self.cache.claims.get((claim.namespace, claim.name))
            # A claimRef a user had set before (without the claim's uid) stays theirs.
            if write.binding.volume.claim_ref is not None or not write.wrote_ref:
                continue
            volume = self.cache.volumes.get(name)
            if current is not None and current.volume_name == name:
                continue  # bound: the controller completed what was written
            if volume is None:
                continue
            caught_up = 0 < write.version <= volume.resource_version
            if caught_up and (volume.claim_ref is None or volume.claim_ref.uid != claim.uid):
                continue  # changed by someone else since
            annotation = BOUND_BY_CONTROLLER_ANNOTATION if write.wrote_annotation else None
            await self._send_quietly(volume_requests.unbind_volume(name, claim.uid, annotation))
        for claim_write in writes.claims:
            claim = claim_write.claim
            current = self.cache.claims.get((claim.namespace, claim.name))
            if not claim_write.wrote or current is None or current.volume_name:
                continue
            caught_up = 0 < claim_write.version <= current.resource_version
            if caught_up and current.selected_node != node:
                continue  # the provisioner took it back already
            await self._send_quietly(
                volume_requests.unselect_node(claim.namespace, claim.name, SELECTED_NODE_ANNOTATION, node)
            )

    async def _send_quietly(self, request: Request) -> None:
        try:
            await self.sender.send(request)
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            # Changed by someone else since (the test fails), or gone: theirs now.
            logger.info("Not taken back: %s", error)
