"""The intake: what the scheduler knows of the cluster, from Kopf's watch events and from lists of its own.

Kopf watches every kind of the table (`kinds.WATCHED`) and hands each event to `on_event`; pods bound to
nodes come from a watch of the intake's own when it has a `watcher` (`bound_pods`). Events alone cannot
keep the cache true: when a watch's resourceVersion has expired (410 Gone, after an API server restart
or a long partition), Kopf lists again and replays the objects that still exist, as events of type
None, and nothing tells of those deleted in between. So the intake lists each kind itself, as an
informer does, and a list replaces: an object held at a version no newer than the list's that the list
lacks is removed exactly as its DELETED event would remove it, with the same queue effects; so is a pod
counted on a node that the guard no longer holds (`_counted_unheld`): what is counted is what is listed.

A kind is listed before the first cycle (`sync`), again whenever Kopf relists it (once Kopf's listing has
stopped coming for `relist_quiet` seconds; one list of a kind at a time, requests meanwhile fold into
one more), and every `resync_interval` seconds as a safety net. A difference a later list finds and no
watch event explains within `drift_grace` seconds is drift (`drift`), repaired as soon as the list found it.

Every state passes the kind's version guard (`versions.Versions`), so an object only moves forward. The
intake also keeps the pending pods (unbound and live, whoever schedules them) and gives parked pods
another try when a change may help them, as kube's queueing hints do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import aiohttp

from promsched.kube.reflecting import SupportsWatch
from promsched.kube.sending import ApiError, SupportsSend, list_pages
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cluster.drift import Difference, Differences, shown
from promsched.scheduling.cluster.versions import Held, Versions
from promsched.scheduling.framework import ClusterChange, ClusterEvent
from promsched.scheduling.intake.bound_pods import BoundPods
from promsched.scheduling.intake.kinds import (
    CLAIMS,
    CSI_DRIVERS,
    CSI_NODES,
    DISRUPTION_BUDGETS,
    NAMESPACES,
    NODES,
    PODS,
    STORAGE_CAPACITIES,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
    VOLUMES,
    WATCHED,
    Kind,
)
from promsched.scheduling.intake.secondary_kinds import SecondaryKinds
from promsched.scheduling.objects.fields import parse_version, version_of
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo, PodSpecError
from promsched.scheduling.objects.resources import Resources
from promsched.scheduling.queues import QueuedPod, SchedulingQueue

logger = logging.getLogger(__name__)

RESYNC_INTERVAL = 300.0
# How long a difference found by a list may wait for the watch event that explains it (an event in
# flight when the list was read) before it counts as drift.
DRIFT_GRACE = 5.0
# Kopf's listing hands over its objects one by one: a kind is listed once they have stopped coming for
# this long, rather than once per handful.
RELIST_QUIET = 1.0
MAX_RETRY_DELAY = 30.0


def _scaled_down(before: Resources, after: Resources) -> bool:
    """Whether `after` requests less of some resource than `before`."""
    # The same object when the pod's requests were taken from its last state, as most updates' are.
    return after is not before and after.max_per_resource(before) != after


class Intake:
    """Feeds `cache` and `queue`. `schedules` tells which pending pods are the scheduler's to place (the
    policies' runtimes know), `refuse` is given each pod whose spec cannot be read, `spawn` the intake's
    short background work (a list); it waits with `sleep` and tells time by `clock`."""

    def __init__(
        self,
        sender: SupportsSend,
        cache: ClusterCache,
        queue: SchedulingQueue,
        *,
        schedules: Callable[[PodInfo], bool],
        refuse: Callable[[Mapping[str, Any], str], None],
        spawn: Callable[[Awaitable[None]], object],
        resync_interval: float = RESYNC_INTERVAL,
        drift_grace: float = DRIFT_GRACE,
        relist_quiet: float = RELIST_QUIET,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        watcher: SupportsWatch | None = None,
        watch_inactivity_timeout: float = 70.0,
    ) -> None:
        self.sender = sender
        self.cache = cache
        self.queue = queue
        self.schedules = schedules
        self.refuse = refuse
        self.spawn = spawn
        self.resync_interval = resync_interval  # 0: no periodic lists
        self.relist_quiet = relist_quiet
        self.sleep = sleep
        self.clock = clock
        self.pending: dict[str, PodInfo] = {}  # every unbound, live pod by UID, whoever schedules it
        self.unusable_nodes: dict[str, str] = {}  # node -> the field that keeps it out
        self.synced = asyncio.Event()  # set once every kind has been listed
        storage = SecondaryKinds(cache, queue)
        # How one object's state (deleted or not) is applied, for each kind of the table.
        self.appliers: dict[Kind, Callable[[bool, Mapping[str, Any]], None]] = {
            NODES: self._apply_node,
            NAMESPACES: self._apply_namespace,
            VOLUMES: storage.apply_volume,
            CLAIMS: storage.apply_claim,
            STORAGE_CLASSES: storage.apply_storage_class,
            CSI_NODES: storage.apply_csi_node,
            VOLUME_ATTACHMENTS: storage.apply_attachment,
            DISRUPTION_BUDGETS: storage.apply_budget,
            CSI_DRIVERS: storage.apply_csi_driver,
            STORAGE_CAPACITIES: storage.apply_storage_capacity,
            PODS: self._apply_pod,
        }
        self.kinds = {kind.plural: kind for kind in WATCHED}
        self.versions = {kind.plural: Versions() for kind in WATCHED}
        self._started: set[str] = set()  # kinds whose first list has begun
        self._listing: set[str] = set()  # kinds being listed now
        self._again: set[str] = set()  # kinds to list once more when their current list ends
        self._asked: dict[str, float] = {}  # kind -> when a list of it was last asked for
        self.differences = Differences(spawn, sleep, drift_grace, logger)
        # With a watcher, bound pods come from a watch of the intake's own and Kopf's has only the others
        # (see `bound_pods`); without, Kopf's watch has them all.
        self.bound_pods = None
        if watcher is not None:
            self.bound_pods = BoundPods(
                watcher,
                self.on_bound_pod,
                lambda: self.relist(PODS),
                inactivity_timeout=watch_inactivity_timeout,
                sleep=sleep,
            )

    # ----- watch events ---------------------------------------------------------------------------
    # `event_type` None: the object comes from Kopf's own listing (at start-up, or after 410 Gone).

    def on_event(self, kind: Kind, event_type: str | None, obj: Mapping[str, Any]) -> None:
        """One watch event of one of the table's kinds, from Kopf."""
        if kind is PODS and event_type == "DELETED" and self.bound_pods is not None:
            self._left_unbound_pods(obj)
        else:
            self._follow(kind, event_type, obj)

    def on_bound_pod(self, event_type: str, obj: Mapping[str, Any]) -> None:
        """One watch event of a pod on a node, from the intake's own watch (`bound_pods`)."""
        self._follow(PODS, event_type, obj)

    def _left_unbound_pods(self, obj: Mapping[str, Any]) -> None:
        """Kopf's watch of unbound pods says DELETED when a pod is deleted and when it is bound alike: the
        API server sends the pod's last unbound state, at the change's resourceVersion. The pod waits no
        more either way; whether it is on a node is the watch of bound pods' to say, so its state at that
        version is still admitted, and only older ones are refused."""
        metadata = obj.get("metadata") or {}
        uid = str(metadata.get("uid", ""))
        self.pending.pop(uid, None)
        self.cache.unnominate(uid)
        self.queue.remove(uid)
        version = version_of(metadata)
        self.differences.explain(PODS.plural, uid, version)  # perhaps a deletion a list found first
        if version is not None:
            self.versions[PODS.plural].left(uid, version)

    def _follow(self, kind: Kind, event_type: str | None, obj: Mapping[str, Any]) -> None:
        if event_type is None:
            # Kopf lists again after its watch expired; only a list of ours can tell what was deleted.
            self.relist(kind)
        metadata = obj.get("metadata") or {}
        key, version = kind.key(metadata), version_of(metadata)
        self.differences.explain(kind.plural, key, version)
        deleted = event_type == "DELETED"
        namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
        if self.versions[kind.plural].admit(key, version, namespace, name, deleted=deleted):
            self.appliers[kind](deleted, obj)

    # ----- what each kind's state does ----------------------------------------------------------

    def _apply_node(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = obj.get("metadata", {}).get("name", "")
        if deleted:
            self.unusable_nodes.pop(name, None)
            if name in self.cache.nodes:
                self.cache.remove_node(name)
                self.queue.move_all_to_active("node deleted", ClusterEvent.NODE_DELETED)
            return
        try:
            node = NodeInfo.from_object(obj)
        except ValueError as error:
            logger.warning("Node %s cannot be used: %s", name, error)
            self.unusable_nodes[name] = str(error)
            self.cache.remove_node(name)
            return
        self.unusable_nodes.pop(name, None)
        event = ClusterEvent.NODE_UPDATED if name in self.cache.nodes else ClusterEvent.NODE_ADDED
        if self.cache.upsert_node(node):
            self.queue.move_all_to_active("node added or changed", event)

    def _apply_pod(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        uid = obj.get("metadata", {}).get("uid", "")
        if deleted:
            self.pending.pop(uid, None)
            self.cache.unnominate(uid)
            self.queue.remove(uid)
            if self.cache.remove_pod(uid):
                self.queue.move_all_to_active("pod deleted", ClusterEvent.ASSIGNED_POD_DELETED)
            return
        counted = self.cache.counted.get(uid)
        previous = self.pending.get(uid) or (counted[1] if counted else None)
        try:
            pod = PodInfo.from_object(obj, previous)
        except PodSpecError as error:
            self.refuse(obj, str(error))
            return
        self._observe(pod)
        if pod.node_name or pod.is_terminal or pod.deletion_timestamp:
            self.pending.pop(uid, None)
            self.cache.unnominate(uid)
            self.queue.remove(uid)
            return
        self.pending[uid] = pod
        self.cache.nominate(pod)
        self._enqueue(pod)

    def _enqueue(self, pod: PodInfo) -> None:
        """A pending pod waits in the queue while it is ours to place and not assumed onto a node (its
        binding under way)."""
        if self.schedules(pod) and pod.uid not in self.cache.assumed:
            self.queue.add_or_update(pod)
        else:
            self.queue.remove(pod.uid)

    def reconsider(self, scheduler_name: str) -> None:
        """Which policy serves `scheduler_name` changed: its pending pods enter or leave the queue."""
        for pod in list(self.pending.values()):
            if pod.scheduler_name == scheduler_name:
                self._enqueue(pod)

    def unreserve(self, uid: str) -> None:
        """A binding failed: the room assumed for the pod is given back, and the pods parked for want of
        room get another try, as kube-scheduler moves them (AssignedPodDelete) after one."""
        self.cache.forget(uid)
        self.queue.move_all_to_active("binding failed", ClusterEvent.ASSIGNED_POD_DELETED)

    def retry(self, entry: QueuedPod) -> None:
        """A pod whose binding failed comes back through backoff, with its history, if it still waits."""
        if entry.pod.uid in self.pending:
            self.queue.requeue(self.pending[entry.pod.uid], entry.added_at, entry.attempts)

    def _observe(self, pod: PodInfo) -> None:
        """Account the pod in the cache, and give parked pods the change may help another try."""
        previous = self.cache.counted.get(pod.uid)
        was_assumed = pod.uid in self.cache.assumed
        if self.cache.observe_pod(pod):
            self.queue.move_all_to_active("pod finished", ClusterEvent.ASSIGNED_POD_DELETED)
            return
        if not pod.node_name or pod.is_terminal:
            return
        if previous is None or was_assumed:
            cache = self.cache
            change = ClusterChange(pod, cache.labels_of_namespace(pod.namespace))
            self.queue.move_all_to_active("pod placed", ClusterEvent.ASSIGNED_POD_ADDED, change)
        elif _scaled_down(previous[1].requests, pod.requests):
            # kube's UpdatePodScaleDown: a resize gave back some of what the pod held on its node.
            self.queue.move_all_to_active("pod scaled down", ClusterEvent.ASSIGNED_POD_SCALED_DOWN)
        elif previous[1].labels != pod.labels:
            self.queue.move_all_to_active("pod relabelled", ClusterEvent.ASSIGNED_POD_UPDATED)

    def _apply_namespace(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        metadata = obj.get("metadata", {})
        name = metadata.get("name", "")
        if deleted:
            self.cache.remove_namespace(name)
        elif self.cache.upsert_namespace(name, metadata.get("labels") or {}):
            self.queue.move_all_to_active("namespace relabelled", ClusterEvent.NAMESPACE_UPDATED)

    # ----- lists ----------------------------------------------------------------------------------

    async def start(self, supervise: Callable[[str, Callable[[], Awaitable[None]]], object]) -> None:
        """List every kind, then list them again every `resync_interval` seconds. `supervise` runs the
        long-lived tasks (the bound pods' watch, the periodic lists) and restarts them should they fail."""
        await self.sync()
        if self.bound_pods is not None:
            supervise("bound-pods-watch", self._follow_bound_pods(self.bound_pods))
        if self.resync_interval > 0:
            supervise("resync", self._resync_periodically)

    async def sync(self, *, retry: bool = True) -> None:
        """List every kind once before the first cycle, so no pod is placed on a node whose existing
        pods are not yet counted. Retries until the API answers, unless `retry` is off."""
        for kind in self.kinds.values():
            self._started.add(kind.plural)
            self._listing.add(kind.plural)
            try:
                await self._list(kind, first=True, retry=retry)
            finally:
                self._listing.discard(kind.plural)
            if kind.plural in self._again:
                self.relist(kind)  # Kopf listed it too, maybe later than this list: see what it missed
        self.synced.set()
        logger.info("Initial sync: %d nodes, %d pods", len(self.cache.nodes), len(self.cache.counted))

    def relist(self, kind: Kind) -> None:
        """List `kind` again, without holding up anything else. One list of a kind runs at a time; any
        requests meanwhile make one more list after it, which sees whatever they may have missed."""
        if kind.plural not in self._started:
            return  # its first list is yet to begin: it will be later than whatever asked
        self._asked[kind.plural] = self.clock()
        if kind.plural in self._listing:
            self._again.add(kind.plural)
            return
        self._listing.add(kind.plural)
        self.spawn(self._relist(kind))

    async def _relist(self, kind: Kind) -> None:
        try:
            while True:
                await self._quiet(kind)
                self._again.discard(kind.plural)
                logger.info("Listing %s again", kind.plural)
                await self._list(kind, first=False)
                if kind.plural not in self._again:
                    return
        finally:
            self._listing.discard(kind.plural)

    async def _quiet(self, kind: Kind) -> None:
        """Wait until no list of `kind` has been asked for in `relist_quiet` seconds."""
        while True:
            wait = self._asked.get(kind.plural, 0.0) + self.relist_quiet - self.clock()
            if wait <= 0:
                return
            await self.sleep(wait)

    def _follow_bound_pods(self, bound_pods: BoundPods) -> Callable[[], Awaitable[None]]:
        """The watch's first run starts from the initial list; a restart lists the pods again first, as
        whatever the failed run left undelivered is in no watch's future."""
        since: list[str | None] = [str(self.versions[PODS.plural].listed_at)]

        async def follow() -> None:
            version, since[0] = since[0], None
            await bound_pods.follow(version)

        return follow

    async def _resync_periodically(self) -> None:
        while True:
            await self.sleep(self.resync_interval)
            for kind in self.kinds.values():
                self.relist(kind)

    async def _list(self, kind: Kind, *, first: bool, retry: bool = True) -> None:
        delay = 1.0
        while True:
            try:
                await self._replace(kind, first=first)
                return
            except (ApiError, aiohttp.ClientError, TimeoutError) as error:
                if not retry:
                    raise
                logger.warning("Listing %s failed (retrying in %.0fs): %s", kind.plural, delay, error)
                await self.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_DELAY)

    async def _replace(self, kind: Kind, *, first: bool) -> None:
        """Read a whole list of `kind` and make the cache agree with it: states newer than those held
        are applied as they are read; objects held at the list's version or before and missing from it
        are removed as their DELETED event would remove them. Objects newer than the list stay.

        A later list hands what it changed to `differences` page by page, before it asks for the next:
        the watch event that explains a change may well arrive while the rest is read (the API server
        answers a list before its watchers have the events up to the list's version)."""
        versions, apply = self.versions[kind.plural], self.appliers[kind]
        listed: set[str] = set()
        list_version: int | None = None
        selected = {"fieldSelector": kind.field_selector} if kind.field_selector else None
        async for page in list_pages(self.sender, kind.path, selected):
            list_version = version_of(page.get("metadata") or {})
            changes: list[Difference] = []
            for obj in page.get("items") or []:
                metadata = obj.get("metadata") or {}
                key, version = kind.key(metadata), version_of(metadata)
                listed.add(key)
                namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
                change = versions.take_listed(key, version, namespace, name)
                if change:
                    apply(False, obj)
                    changes.append(Difference(kind.plural, key, shown(namespace, name), change, version))
            if not first:
                self.differences.found(changes)
        if list_version is not None:
            # What the cache counts of pods beyond what their version guard holds goes too.
            unheld = self._counted_unheld() if kind is PODS else ()
            removed: list[Difference] = []
            for key, held in versions.missing_from(listed, list_version, unheld):
                versions.remove(key, list_version)
                metadata = {"name": held.name, "namespace": held.namespace, "uid": key}
                apply(True, {"metadata": metadata})
                name = shown(held.namespace, held.name)
                removed.append(Difference(kind.plural, key, name, "removed", held.version))
            versions.listed(list_version)
            if not first:
                self.differences.found(removed)

    def _counted_unheld(self) -> Iterator[tuple[str, Held]]:
        """The pods counted on a node that the pods' version guard does not hold. A pod bound here
        leaves Kopf's watch of unbound pods, and so the guard (`Versions.left`), before the watch of
        bound pods has it; if that watch loses the binding (410 Gone) and the pod ends before it starts
        anew, no event tells. kube-scheduler expires no assumed pod either (kubernetes#110925 set the
        TTL after FinishBinding to 0: expiring a pod whose binding was slow gave its room twice); its
        informer's relist deletes the pod ("final state unknown") from its queue and its cache. So does
        this relist, which the 410 itself asks for, with the periodic one as a safety net."""
        held = self.versions[PODS.plural].held
        for uid, (_node, pod) in self.cache.counted.items():
            if uid not in held:
                yield uid, Held(parse_version(pod.resource_version) or 0, pod.namespace, pod.name)
