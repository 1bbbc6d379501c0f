"""One rebalance cycle's plan: which nodes stayed hot, what moves off them and where it would land.

Pure: the caller gives the sustained and current values, each pod's share of a node's value, and the
scheduler's own choice for a pod's replacement (`decide()`), so the plan is tested without a cluster.

A node is hot when a plugin's value stayed past its hot threshold for the whole `sustainedFor` window.
Victims leave a hot node lowest priority first, then largest share first, until the node's expected
value is at most the target. A pod moves only when its replacement would land on another node that
stays at most the target with the pod (and this cycle's earlier moves) added; otherwise nothing moves
and the plan says why. That is what keeps a moved pod from being sent straight back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from promsched.scheduling.pods import PodInfo


class BlockReason(StrEnum):
    """Why a hot node keeps a pod; the `reason` label of promsched_rebalance_blocked_total."""

    NO_MOVABLE_POD = "NoMovablePod"
    NO_DESTINATION = "NoDestination"
    SAME_NODE = "SameNode"
    DESTINATION_OVER_TARGET = "DestinationOverTarget"
    NODE_LIMIT = "NodeLimit"
    CYCLE_LIMIT = "CycleLimit"
    RATE_LIMIT = "RateLimit"
    UNKNOWN_SHARE = "UnknownShare"
    # Found when evicting, after the plan.
    DISRUPTION_BUDGET = "PodDisruptionBudget"
    EVICTION_FAILED = "EvictionFailed"
    METRICS_NOT_FRESH = "MetricsNotFresh"


@dataclass(frozen=True, slots=True)
class Threshold:
    """A plugin's hot and target thresholds, on its own scale and side."""

    plugin: str
    hot: float
    target: float
    higher_is_better: bool = False
    is_percent: bool = True

    def past_hot(self, value: float) -> bool:
        return value < self.hot if self.higher_is_better else value > self.hot

    def within_target(self, value: float) -> bool:
        return value >= self.target if self.higher_is_better else value <= self.target

    def relieved(self, value: float, share: float) -> float:
        """The value once a pod with `share` of it has left."""
        return value + share if self.higher_is_better else value - share

    def burdened(self, value: float, share: float) -> float:
        """The value once a pod with `share` of it has arrived."""
        return value - share if self.higher_is_better else value + share

    def show(self, value: float) -> str:
        return f"{value:.0f}%" if self.is_percent else f"{value:g}"


@dataclass(frozen=True, slots=True)
class Destination:
    """Where the scheduler would place a pod's replacement: `node`, or None with `message` saying why."""

    node: str | None
    message: str = ""


@dataclass(frozen=True, slots=True)
class HotNode:
    node: str
    plugin: str
    sustained: float  # the value the node stayed past the hot threshold by, over the whole window
    current: float | None  # the value in the scheduler's latest snapshot


@dataclass(frozen=True, slots=True)
class Move:
    pod: PodInfo
    source: str
    destination: str
    plugin: str  # the plugin the source node is hottest by
    reason: str  # for the Event and the status, e.g. "node-3 cpu 91% for 5m > 85%; ..."
    shares: Mapping[str, float] = field(default_factory=dict)  # plugin -> points the pod takes along


@dataclass(frozen=True, slots=True)
class Blocked:
    node: str
    pod: str  # namespace/name, or "" when no pod was tried
    kind: BlockReason
    reason: str


@dataclass(frozen=True)
class RebalancePlan:
    hot: tuple[HotNode, ...] = ()
    moves: tuple[Move, ...] = ()
    blocked: tuple[Blocked, ...] = ()


@dataclass(frozen=True, slots=True)
class Limits:
    per_node: int
    per_cycle: int
    left_this_minute: int  # the cluster-wide rate, less the evictions of the last minute


# pod, plugin, node -> the points of the plugin's value on the node that the pod accounts for, or
# None when there is no telling.
ShareOf = Callable[[PodInfo, str, str], float | None]


@dataclass
class _Cycle:
    """What the plan has committed so far: moved pods and the load they take to each destination."""

    limits: Limits
    moves: list[Move] = field(default_factory=list)
    blocked: list[Blocked] = field(default_factory=list)
    arriving: dict[tuple[str, str], float] = field(default_factory=dict)  # (node, plugin) -> points

    def limit_reached(self) -> BlockReason | None:
        if len(self.moves) >= self.limits.left_this_minute:
            return BlockReason.RATE_LIMIT
        if len(self.moves) >= self.limits.per_cycle:
            return BlockReason.CYCLE_LIMIT
        return None


def hot_nodes(
    thresholds: Sequence[Threshold],
    sustained: Mapping[str, Mapping[str, float]],
    current: Mapping[str, Mapping[str, float]],
) -> list[HotNode]:
    """Every (node, plugin) whose value stayed past the hot threshold, the most overshot first."""
    found = [
        HotNode(node, threshold.plugin, value, current.get(threshold.plugin, {}).get(node))
        for threshold in thresholds
        for node, value in sustained.get(threshold.plugin, {}).items()
        if threshold.past_hot(value)
    ]
    by_plugin = {threshold.plugin: threshold for threshold in thresholds}
    found.sort(key=lambda hot: (-abs(hot.sustained - by_plugin[hot.plugin].hot), hot.node, hot.plugin))
    return found


def plan_rebalance(
    thresholds: Sequence[Threshold],
    sustained: Mapping[str, Mapping[str, float]],
    current: Mapping[str, Mapping[str, float]],
    candidates: Callable[[str], Sequence[PodInfo]],
    share_of: ShareOf,
    destination_of: Callable[[PodInfo], Destination],
    limits: Limits,
    window: str,
) -> RebalancePlan:
    """The cycle's plan. `sustained[plugin][node]` is the value the node held past for `window` (for
    a plugin where higher is worse, its lowest over the window); `current` the snapshot's values;
    `candidates(node)` the pods that may move off a node, in any order."""
    by_plugin = {threshold.plugin: threshold for threshold in thresholds}
    hot = hot_nodes(thresholds, sustained, current)
    cycle = _Cycle(limits)
    relieved: set[str] = set()
    for entry in hot:
        if entry.node in relieved:
            continue
        relieved.add(entry.node)
        node_hot = [item for item in hot if item.node == entry.node]
        _relieve(
            entry.node, node_hot, by_plugin, current, candidates, share_of, destination_of, cycle, window
        )
    return RebalancePlan(tuple(hot), tuple(cycle.moves), tuple(cycle.blocked))


def _expected(
    node: str, plugin: str, current: Mapping[str, Mapping[str, float]], hot: HotNode | None
) -> float:
    value = current.get(plugin, {}).get(node)
    if value is None and hot is not None:
        value = hot.sustained
    return 0.0 if value is None else value


def _relieve(
    node: str,
    node_hot: list[HotNode],
    by_plugin: Mapping[str, Threshold],
    current: Mapping[str, Mapping[str, float]],
    candidates: Callable[[str], Sequence[PodInfo]],
    share_of: ShareOf,
    destination_of: Callable[[PodInfo], Destination],
    cycle: _Cycle,
    window: str,
) -> None:
    # The value still to shed per hot plugin, from the latest snapshot (the sustained value is older).
    expected = {hot.plugin: _expected(node, hot.plugin, current, hot) for hot in node_hot}
    lead = node_hot[0]
    lead_threshold = by_plugin[lead.plugin]
    why_hot = (
        f"{node} {lead.plugin} {lead_threshold.show(lead.sustained)} for {window} "
        f"{'<' if lead_threshold.higher_is_better else '>'} {lead_threshold.show(lead_threshold.hot)}"
    )
    pods = list(candidates(node))
    if not pods:
        cycle.blocked.append(
            Blocked(node, "", BlockReason.NO_MOVABLE_POD, f"{why_hot}; no pod on it may move")
        )
        return

    def order(pod: PodInfo) -> tuple[int, float, str]:
        return (pod.priority, -(share_of(pod, lead.plugin, node) or 0.0), pod.key)

    moved_here = 0
    for pod in sorted(pods, key=order):
        if all(by_plugin[plugin].within_target(value) for plugin, value in expected.items()):
            return
        limit = cycle.limit_reached()
        if limit is None and moved_here >= cycle.limits.per_node:
            limit = BlockReason.NODE_LIMIT
        if limit is not None:
            cycle.blocked.append(Blocked(node, pod.key, limit, f"{why_hot}; {_LIMIT_TEXT[limit]}"))
            return
        shares = {plugin: share_of(pod, plugin, node) for plugin in by_plugin}
        unknown = sorted(plugin for plugin in expected if shares[plugin] is None)
        if unknown:
            cycle.blocked.append(
                Blocked(
                    node,
                    pod.key,
                    BlockReason.UNKNOWN_SHARE,
                    f"{why_hot}; the pod's share of {', '.join(unknown)} is unknown",
                )
            )
            continue
        move = _check_destination(
            pod, node, lead.plugin, shares, by_plugin, current, destination_of, cycle, why_hot
        )
        if move is None:
            continue
        cycle.moves.append(move)
        moved_here += 1
        for plugin, share in shares.items():
            if share:
                cycle.arriving[move.destination, plugin] = (
                    cycle.arriving.get((move.destination, plugin), 0.0) + share
                )
                if plugin in expected:
                    expected[plugin] = by_plugin[plugin].relieved(expected[plugin], share)


_LIMIT_TEXT = {
    BlockReason.NODE_LIMIT: "maxEvictionsPerNode reached this cycle",
    BlockReason.CYCLE_LIMIT: "maxEvictionsPerCycle reached",
    BlockReason.RATE_LIMIT: "maxEvictionsPerMinute reached",
}


def _check_destination(
    pod: PodInfo,
    source: str,
    plugin_hot: str,
    shares: Mapping[str, float | None],
    by_plugin: Mapping[str, Threshold],
    current: Mapping[str, Mapping[str, float]],
    destination_of: Callable[[PodInfo], Destination],
    cycle: _Cycle,
    why_hot: str,
) -> Move | None:
    """The move, or None (recorded as blocked) when the replacement would land nowhere, back on the
    source, or on a node that would then be past a target."""
    destination = destination_of(pod)
    target = destination.node
    if target is None:
        cycle.blocked.append(
            Blocked(
                source,
                pod.key,
                BlockReason.NO_DESTINATION,
                f"{why_hot}; no node fits the replacement: {destination.message}",
            )
        )
        return None
    if target == source:
        cycle.blocked.append(
            Blocked(
                source,
                pod.key,
                BlockReason.SAME_NODE,
                f"{why_hot}; the replacement would land on {source} again",
            )
        )
        return None
    landing = []
    for plugin, threshold in by_plugin.items():
        value = current.get(plugin, {}).get(target)
        if value is None:
            continue
        value = threshold.burdened(value, cycle.arriving.get((target, plugin), 0.0))
        value = threshold.burdened(value, shares.get(plugin) or 0.0)
        if not threshold.within_target(value):
            cycle.blocked.append(
                Blocked(
                    source,
                    pod.key,
                    BlockReason.DESTINATION_OVER_TARGET,
                    f"{why_hot}; the replacement would land on {target} at {plugin} {threshold.show(value)}, "
                    f"past the target {threshold.show(threshold.target)}",
                )
            )
            return None
        landing.append(f"{plugin} {threshold.show(value)}")
    at = f" at {', '.join(landing)}" if landing else ""
    known = {plugin: share for plugin, share in shares.items() if share is not None}
    return Move(pod, source, target, plugin_hot, f"{why_hot}; expected destination {target}{at}", known)
