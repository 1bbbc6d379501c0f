"""The cpu and memory thresholds held against an incoming pod's estimate: a node whose value plus the
pod's estimated share of its allocatable would cross a threshold is filtered out, for that threshold's
reason (kube's NodeResourcesFit counts a pod's requests against a node the same way, before it lands).

A node with none of a resource allocatable has no room for any of it (as kube's NodeResourcesFit
finds no room for a request there): a pod estimated to use some is filtered out, saying so.

This runs for every feasible node for every pod, so the room each node has left under each threshold
(in millicores and bytes) is worked out once per node result, and a pod's check is a comparison per
threshold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import gt

from promsched.metrics.plugins import Plugin
from promsched.metrics.plugins.interface import clamp_percent
from promsched.metrics.scoring import FilterReason, NodeResult, incoming_pod_reason
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.estimating import ESTIMATED_PLUGINS, Estimate
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.resources import Resources


@dataclass(frozen=True, slots=True)
class _Check:
    place: int  # the plugin's place in a node result's plugins
    plugin: Plugin
    allocatable_of: Callable[[Resources], int]
    estimated: Callable[[Estimate], int]


class Thresholds:
    """A snapshot's cpu and memory thresholds; one per snapshot (the decision memo keeps it)."""

    def __init__(self, snapshot: Snapshot, cache: ClusterCache) -> None:
        self.cache = cache
        self.checks = tuple(
            _Check(place, plugin_snapshot.plugin, *ESTIMATED_PLUGINS[plugin_snapshot.plugin.name])
            for place, plugin_snapshot in enumerate(snapshot.plugins.values())
            if plugin_snapshot.plugin.name in ESTIMATED_PLUGINS
            and plugin_snapshot.plugin.threshold is not None
        )
        # node -> (the result and node object the room was worked out for, the room under each check's
        # threshold): a room is a share of the node's allocatable.
        self.rooms: dict[str, tuple[NodeResult, NodeInfo | None, tuple[float, ...]]] = {}

    def incoming(self, estimate: Estimate) -> IncomingLoad | None:
        """The pod's load against the thresholds; None when none concerns it."""
        if not self.checks:
            return None
        amounts = tuple(check.estimated(estimate) for check in self.checks)
        return IncomingLoad(self, amounts) if any(amounts) else None

    def remember(
        self, result: NodeResult, info: NodeInfo | None
    ) -> tuple[NodeResult, NodeInfo | None, tuple[float, ...]]:
        known = self.rooms[result.node] = (result, info, self._room(result, info))
        return known

    def _room(self, result: NodeResult, info: NodeInfo | None) -> tuple[float, ...]:
        """What a pod may add under each threshold: (threshold - value)% of allocatable, none where
        nothing is allocatable. A load percent cannot pass 100, so a threshold of 100 or more leaves
        unbounded room, as does a node not in the cache (no pod goes there)."""
        rooms = []
        for check in self.checks:
            value = result.plugins[check.place].raw
            threshold = check.plugin.threshold
            if value is None or info is None or threshold is None or threshold >= 100:
                rooms.append(math.inf)
            else:
                allocatable = check.allocatable_of(info.allocatable)
                rooms.append(max(0.0, threshold - clamp_percent(value)) * allocatable / 100.0)
        return tuple(rooms)

    def filtered(self, result: NodeResult, amounts: tuple[int, ...], rooms: tuple[float, ...]) -> NodeResult:
        """`result` filtered for the first threshold the amounts cross (`rooms`: the node's room under
        each)."""
        info = self.cache.nodes[result.node]
        for check, amount, room in zip(self.checks, amounts, rooms, strict=True):
            if amount <= room:
                continue
            allocatable = check.allocatable_of(info.allocatable)
            if not allocatable:
                return result._replace(reasons=(_nothing_allocatable(check.plugin, result.node),))
            value = result.plugins[check.place].raw
            assert value is not None  # a room is unbounded without a value
            reason = incoming_pod_reason(check.plugin, result.node, value, 100.0 * amount / allocatable)
            if reason is not None:
                return result._replace(reasons=(reason,))
        return result


def _nothing_allocatable(plugin: Plugin, node: str) -> FilterReason:
    return FilterReason(
        f"node(s) had no allocatable {plugin.name} for the pod's estimate",
        f"{node} has no allocatable {plugin.name}, and the pod is estimated to use some",
    )


@dataclass(frozen=True, slots=True)
class IncomingLoad:
    """One pod's estimated amounts, per threshold of `thresholds`."""

    thresholds: Thresholds
    amounts: tuple[int, ...]

    def filter(self, results: list[NodeResult]) -> list[NodeResult]:
        """`results` with the feasible nodes the pod would take past a threshold filtered out."""
        thresholds, amounts = self.thresholds, self.amounts
        known_rooms, nodes = thresholds.rooms, thresholds.cache.nodes
        for position, result in enumerate(results):
            if result.reasons:
                continue
            known = known_rooms.get(result.node)
            info = nodes.get(result.node)
            if known is None or known[0] is not result or known[1] is not info:
                known = thresholds.remember(result, info)
            if any(map(gt, amounts, known[2])):
                results[position] = thresholds.filtered(result, amounts, known[2])
        return results
