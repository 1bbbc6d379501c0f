"""One rebalance cycle's plan: which nodes stayed hot, what moves off them and where it would land.

Pure: the caller gives the sustained and current values, each pod's share of a node's value, and the
scheduler's own choice for a pod's replacement (`decide()`), so the plan is tested without a cluster.
The plan is made one move at a time (`RebalancePlanning.moves`), so a move the Eviction API refuses
is replaced by the node's next candidate instead of using up the node's limit.

A node is hot when a plugin's value stayed past its hot threshold for the whole `sustainedFor` window.
Victims leave a hot node lowest priority first, then largest share first, until the node's expected
value is at most the target. A pod moves only when its replacement would land on another node that
stays at most the target with the pod (and this cycle's earlier moves) added; otherwise nothing moves
and the plan says why. That is what keeps a moved pod from being sent straight back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from promsched.scheduling.objects.pods import PodInfo


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


@dataclass(frozen=True, slots=True)
class Share:
    """The points of a plugin's value on a node that a pod accounts for, and where that figure comes
    from (for the reason: "observed over 5m", "estimate: 1 x request 800m")."""

    points: float
    basis: str


# pod, plugin, node -> the pod's share of the plugin's value on the node, or None when there is no
# telling.
ShareOf = Callable[[PodInfo, str, str], Share | None]


@dataclass
class _Cycle:
    """What the plan has committed so far: moved pods and the load they take to each destination."""

    limits: Limits
    moves: list[Move] = field(default_factory=list)
    blocked: list[Blocked] = field(default_factory=list)
    arriving: dict[tuple[str, str], float] = field(default_factory=dict)  # (node, plugin) -> points
    # Evictions counted against the limits: the moves, and those whose outcome is unknown.
    spent: int = 0

    def limit_reached(self) -> BlockReason | None:
        if self.spent >= self.limits.left_this_minute:
            return BlockReason.RATE_LIMIT
        if self.spent >= self.limits.per_cycle:
            return BlockReason.CYCLE_LIMIT
        return None


@dataclass(frozen=True, slots=True)
class _Refusal:
    move: Move
    may_have_left: bool


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


class RebalancePlanning:
    """A cycle's plan, made one move at a time so that each can be carried out before the next is
    chosen. `sustained[plugin][node]` is the value the node held past for `window` (for a plugin where
    higher is worse, its lowest over the window); `current` the snapshot's values; `candidates(node)`
    the pods that may move off a node, in any order; pods in `deferred` (uids) are tried after the others.

    A move `refuse`d by whoever carries it out is blocked instead, and the node's next candidate is
    tried: a pod that did not leave spends none of the limits. One whose outcome is unknown (it may
    have left) spends them, so no limit is ever exceeded, but relieves nothing."""

    def __init__(
        self,
        thresholds: Sequence[Threshold],
        sustained: Mapping[str, Mapping[str, float]],
        current: Mapping[str, Mapping[str, float]],
        candidates: Callable[[str], Sequence[PodInfo]],
        share_of: ShareOf,
        destination_of: Callable[[PodInfo], Destination],
        limits: Limits,
        window: str,
        *,
        deferred: Collection[str] = frozenset(),
    ) -> None:
        self.by_plugin = {threshold.plugin: threshold for threshold in thresholds}
        self.hot = hot_nodes(thresholds, sustained, current)
        self.current = current
        self.candidates = candidates
        self.share_of = share_of
        self.destination_of = destination_of
        self.window = window
        self.deferred = deferred
        self._cycle = _Cycle(limits)
        self._refusal: _Refusal | None = None

    def moves(self) -> Iterator[Move]:
        """Each move, as it is decided; the plan is complete once this is exhausted."""
        relieved: set[str] = set()
        for entry in self.hot:
            if entry.node not in relieved:
                relieved.add(entry.node)
                yield from self._relieve(entry.node, [item for item in self.hot if item.node == entry.node])

    def refuse(self, move: Move, kind: BlockReason, reason: str, *, may_have_left: bool = False) -> None:
        """The move just yielded did not happen, for `reason`."""
        self._cycle.blocked.append(Blocked(move.source, move.pod.key, kind, reason))
        self._refusal = _Refusal(move, may_have_left)

    def plan(self) -> RebalancePlan:
        cycle = self._cycle
        return RebalancePlan(tuple(self.hot), tuple(cycle.moves), tuple(cycle.blocked))

    def _relieve(self, node: str, node_hot: list[HotNode]) -> Iterator[Move]:
        by_plugin, cycle = self.by_plugin, self._cycle
        # The value still to shed per hot plugin, from the latest snapshot (the sustained value is older).
        expected = {hot.plugin: _expected(node, hot.plugin, self.current, hot) for hot in node_hot}
        lead = node_hot[0]
        lead_threshold = by_plugin[lead.plugin]
        why_hot = (
            f"{node} {lead.plugin} {lead_threshold.show(lead.sustained)} for {self.window} "
            f"{'<' if lead_threshold.higher_is_better else '>'} {lead_threshold.show(lead_threshold.hot)}"
        )
        pods = list(self.candidates(node))
        if not pods:
            cycle.blocked.append(
                Blocked(node, "", BlockReason.NO_MOVABLE_POD, f"{why_hot}; no pod on it may move")
            )
            return

        def order(pod: PodInfo) -> tuple[bool, int, float, str]:
            share = self.share_of(pod, lead.plugin, node)
            return (pod.uid in self.deferred, pod.priority, -(share.points if share else 0.0), pod.key)

        spent_here = 0
        for pod in sorted(pods, key=order):
            if all(by_plugin[plugin].within_target(value) for plugin, value in expected.items()):
                return
            limit = cycle.limit_reached()
            if limit is None and spent_here >= cycle.limits.per_node:
                limit = BlockReason.NODE_LIMIT
            if limit is not None:
                cycle.blocked.append(Blocked(node, pod.key, limit, f"{why_hot}; {_LIMIT_TEXT[limit]}"))
                return
            shares = {plugin: self.share_of(pod, plugin, node) for plugin in by_plugin}
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
            known = {plugin: share for plugin, share in shares.items() if share is not None}
            move = _check_destination(
                pod, node, lead.plugin, known, by_plugin, self.current, self.destination_of, cycle, why_hot
            )
            if move is None:
                continue
            self._refusal = None
            yield move
            refusal, self._refusal = self._refusal, None
            if refusal is not None:
                if refusal.may_have_left:
                    cycle.spent += 1
                    spent_here += 1
                continue
            cycle.moves.append(move)
            cycle.spent += 1
            spent_here += 1
            for plugin, share in move.shares.items():
                if share:
                    cycle.arriving[move.destination, plugin] = (
                        cycle.arriving.get((move.destination, plugin), 0.0) + share
                    )
                    if plugin in expected:
                        expected[plugin] = by_plugin[plugin].relieved(expected[plugin], share)


def _expected(
    node: str, plugin: str, current: Mapping[str, Mapping[str, float]], hot: HotNode | None
) -> float:
    value = current.get(plugin, {}).get(node)
    if value is None and hot is not None:
        value = hot.sustained
    return 0.0 if value is None else value


_LIMIT_TEXT = {
    BlockReason.NODE_LIMIT: "maxEvictionsPerNode reached this cycle",
    BlockReason.CYCLE_LIMIT: "maxEvictionsPerCycle reached",
    BlockReason.RATE_LIMIT: "maxEvictionsPerMinute reached",
}


def _check_destination(
    pod: PodInfo,
    source: str,
    plugin_hot: str,
    shares: Mapping[str, Share],
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
        share = shares.get(plugin)
        value = threshold.burdened(value, share.points if share else 0.0)
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
    its_share = ", ".join(
        f"{plugin} {by_plugin[plugin].show(share.points)} ({share.basis})" for plugin, share in shares.items()
    )
    return Move(
        pod,
        source,
        target,
        plugin_hot,
        f"{why_hot}; its share: {its_share}; expected destination {target}{at}",
        {plugin: share.points for plugin, share in shares.items()},
    )
