"""What the scheduler knows of the cluster: nodes, what each node's pods request, and pods in flight.

A pod counts on its node from the moment the scheduler assumes it there (before its binding is sent)
until it is deleted or finishes, so two pods can never be given the last slot of a node. A binding that
fails forgets the assumption. Pods bound by anyone (kube-scheduler, a user setting nodeName) count too.

Placements are also remembered with their time, for the herd effect: pods placed after the latest
metric snapshot add their requests to the node's load, until a newer snapshot is taken.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from promsched.scheduling.nodes import NodeInfo, NodeUsage
from promsched.scheduling.pods import PodInfo
from promsched.scheduling.resources import Resources

# Placements older than this no longer matter to any snapshot (refresh intervals are far shorter).
PLACEMENT_MEMORY_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class Placement:
    at: float
    uid: str
    requests: Resources


@dataclass
class ClusterCache:
    clock: Callable[[], float] = time.time
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    usage: dict[str, NodeUsage] = field(default_factory=dict)
    # uid -> (node, pod) for every pod counted on a node, bound or assumed.
    counted: dict[str, tuple[str, PodInfo]] = field(default_factory=dict)
    assumed: set[str] = field(default_factory=set)
    placements: dict[str, deque[Placement]] = field(default_factory=dict)

    def usage_of(self, node: str) -> NodeUsage:
        usage = self.usage.get(node)
        if usage is None:
            usage = self.usage[node] = NodeUsage()
        return usage

    def upsert_node(self, node: NodeInfo) -> bool:
        """Store the node; True when something that matters to scheduling changed (not a heartbeat)."""
        previous = self.nodes.get(node.name)
        self.nodes[node.name] = node
        return previous is None or replace(previous, resource_version=node.resource_version) != node

    def remove_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        self.placements.pop(name, None)
        # Its pods stay counted under its name: they are deleted by the garbage collector, not by us.

    def _count(self, node: str, pod: PodInfo) -> None:
        self.counted[pod.uid] = (node, pod)
        self.usage_of(node).add(pod)

    def _uncount(self, uid: str) -> str | None:
        entry = self.counted.pop(uid, None)
        if entry is None:
            return None
        node, pod = entry
        self.usage_of(node).remove(pod)
        self.assumed.discard(uid)
        return node

    def observe_pod(self, pod: PodInfo) -> bool:
        """Account a pod as its latest state says; True when this freed resources on a node."""
        current = self.counted.get(pod.uid)
        if pod.node_name and not pod.is_terminal:
            if current is not None and current[0] == pod.node_name:
                # Bound where we assumed it (or already counted): it is no longer in flight.
                self.assumed.discard(pod.uid)
                if current[1].requests != pod.requests or current[1].host_ports != pod.host_ports:
                    self._uncount(pod.uid)
                    self._count(pod.node_name, pod)
                return False
            freed = self._uncount(pod.uid) is not None
            self._count(pod.node_name, pod)
            self._remember(pod.node_name, pod)
            return freed
        if pod.uid in self.assumed:
            return False  # our binding is in flight; the pod's watch event has not caught up
        return self._uncount(pod.uid) is not None

    def remove_pod(self, uid: str) -> bool:
        """The pod is gone; True when it had been counted on a node."""
        return self._uncount(uid) is not None

    def assume(self, pod: PodInfo, node: str) -> None:
        self._count(node, pod)
        self.assumed.add(pod.uid)
        self._remember(node, pod)

    def forget(self, uid: str) -> None:
        """A binding failed: the pod no longer counts where it was assumed."""
        if uid in self.assumed:
            node = self._uncount(uid)
            if node is not None:
                placements = self.placements.get(node)
                if placements:
                    self.placements[node] = deque(p for p in placements if p.uid != uid)

    def _remember(self, node: str, pod: PodInfo) -> None:
        placements = self.placements.setdefault(node, deque())
        now = self.clock()
        placements.append(Placement(now, pod.uid, pod.requests))
        while placements and placements[0].at < now - PLACEMENT_MEMORY_SECONDS:
            placements.popleft()

    def placed_since(self, node: str, since: float) -> Iterator[Placement]:
        for placement in reversed(self.placements.get(node, ())):
            if placement.at <= since:
                return
            yield placement

    def recent_load_percent(self, node: str, since: float) -> tuple[float, float]:
        """CPU and memory requests of pods placed on `node` after `since`, as percent of allocatable."""
        info = self.nodes.get(node)
        if info is None:
            return 0.0, 0.0
        cpu = memory = 0
        for placement in self.placed_since(node, since):
            cpu += placement.requests.milli_cpu
            memory += placement.requests.memory
        allocatable = info.allocatable
        cpu_percent = 100.0 * cpu / allocatable.milli_cpu if allocatable.milli_cpu else 0.0
        memory_percent = 100.0 * memory / allocatable.memory if allocatable.memory else 0.0
        return cpu_percent, memory_percent
