"""Every node's verdict and score for pods alike, kept across the pods of a burst.

Most pods of a burst share their spec, and between two of them only the node the first went to (and
the few the watches brought news of) changed. A board holds, for pods alike in what the node filters
read of them and in their load against the thresholds, each node's outcome under one snapshot:
filtered (why) or scored. It is brought up to date by the cache's change feeds (the nodes whose
object, counted pods or placements changed), so a decision costs the nodes that changed plus slices
over the nodes it searches, not a walk over each of them. A new snapshot changes no filter's verdict:
the runtime hands the boards to the next snapshot's memo, and only the nodes that passed the filters
are scored anew.

`decide` uses a board where its node loop would read nothing else: every filter's verdict depends on
the node and its usage (`node_verdicts.usage_only`: its totals, its host ports), and no pod is
nominated. Cluster checks that can tell which nodes they reject (topology spreading, pod anti-affinity:
the nodes of a few domains; pod affinity: those outside a few) overrule the board there.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress
from typing import Final

from promsched.metrics.scoring import NodeResult, ScoreMemo, score_nodes
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.estimating import requested_shares
from promsched.scheduling.cycle.thresholding import IncomingLoad
from promsched.scheduling.filters import run_filters
from promsched.scheduling.framework import ClusterEvent, Filter, Status
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

# Boards kept per decision memo (the least recently used go first): a burst has a few pod specs.
BOARDS_KEPT: Final = 16


@dataclass(slots=True)
class Search:
    """What a search over the nodes found: the feasible nodes in the order searched, the filtered
    ones counted by reason, the events that may lift those, and how many nodes were searched."""

    ranked: list[NodeResult]
    nodes: list[NodeInfo] | None  # the ranked nodes' objects, where the search had them at hand
    filtered: Counter[str]
    lifted_by: ClusterEvent
    searched: int


@dataclass(slots=True)
class Board:
    """Per node, in the cache's order: its object, and its score result when feasible, else why it is
    filtered."""

    cache: ClusterCache
    scored: object  # the score memo's results this board's scores were looked up in
    names: list[str]
    index: dict[str, int]
    nodes: list[NodeInfo | None]
    feasible: bytearray
    passed: bytearray  # 1 where the node passed the filters, so its score and thresholds decide
    results: list[NodeResult | None]
    reasons: list[str | None]
    # the cache's change counts it is up to date with: node objects, usage, placements
    counts: tuple[int, int, int]

    def search(self, start: int, wanted: int, rejected: Mapping[str, Status] | None = None) -> Search:
        """The nodes from `start` (wrapping around) until `wanted` feasible ones are found, or all. What
        may lift the filtered nodes' rejections is left out: it matters to a pod that fits nowhere, and
        `decide` judges such a pod node by node, for preemption. `rejected`: the nodes the pod's cluster
        checks reject, which count as `decide`'s node walk counts them (after the filters, before the
        metric thresholds)."""
        total = len(self.names)
        start %= total
        feasible = self.feasible
        overruled: dict[int, str] = {}  # position -> the check's reason, where the filters passed
        if rejected:
            feasible = bytearray(feasible)
            index, passed = self.index, self.passed  # looked up once: a check may reject most nodes
            for name, status in rejected.items():
                position = index[name]
                if passed[position]:
                    feasible[position] = 0
                    overruled[position] = status.reason
        searched = _searched(feasible, start, wanted, total)
        segments = [(start, min(start + searched, total))]
        if start + searched > total:
            segments.append((0, start + searched - total))
        ranked: list[NodeResult] = []
        nodes: list[NodeInfo] = []
        filtered: Counter[str] = Counter()
        for low, high in segments:
            window = feasible[low:high]
            ranked.extend(compress(self.results[low:high], window))  # type: ignore[arg-type]
            nodes.extend(compress(self.nodes[low:high], window))  # type: ignore[arg-type]
            filtered.update(filter(None, self.reasons[low:high]))
        # On the overruled nodes searched, the check's reason counts in place of a metric threshold's (or
        # of none: the node was feasible). Counted in bulk: a check may overrule most nodes.
        overruled_searched = [position for position in overruled if (position - start) % total < searched]
        filtered.update([overruled[position] for position in overruled_searched])
        reasons = self.reasons
        filtered.subtract(
            [threshold for position in overruled_searched if (threshold := reasons[position]) is not None]
        )
        return Search(ranked, nodes, +filtered, ClusterEvent.NONE, searched)


def _searched(feasible: bytearray, start: int, wanted: int, total: int) -> int:
    """How many nodes from `start` a search takes to find `wanted` feasible ones: up to and including
    the wanted-th, or all of them."""
    after = feasible.count(1, start, total)
    if after >= wanted:
        return _nth(feasible, start, total, wanted) - start + 1
    before = feasible.count(1, 0, start)
    if after + before >= wanted:
        return total - start + _nth(feasible, 0, start, wanted - after) + 1
    return total


def _nth(feasible: bytearray, low: int, high: int, count: int) -> int:
    """The index of the `count`-th feasible node in [low, high), which holds at least that many."""
    while high - low > 1:  # invariant: the count-th lies in [low, high)
        middle = (low + high) // 2
        before = feasible.count(1, low, middle)
        if before >= count:
            high = middle
        else:
            count -= before
            low = middle
    return low


@dataclass(slots=True)
class Boards:
    """A decision memo's boards, by what the filters read of a pod and its load against thresholds."""

    kept: OrderedDict[Hashable, Board] = field(default_factory=OrderedDict)

    def following(self, scored: object) -> Boards:
        """For the next snapshot's memo: the boards up to date with `scored`, the ending snapshot's
        scores. Boards last used under an older snapshot are left behind: they would keep its results
        alive, and they are rebuilt afresh when a pod like theirs comes again."""
        return Boards(OrderedDict((key, board) for key, board in self.kept.items() if board.scored is scored))

    def board(
        self,
        key: Hashable,
        pod: PodInfo,
        cache: ClusterCache,
        snapshot: Snapshot,
        scores: ScoreMemo,
        herd: Mapping[str, Mapping[str, float]],
        filters: tuple[Filter, ...],
        incoming: IncomingLoad | None,
    ) -> Board:
        """The board for pods like `pod`, up to date with the cache and `herd` (the herd loads, up to
        date with the cache's placements)."""
        judging = _Judging(pod, snapshot, scores, herd, filters, incoming)
        scored = scores.at(snapshot, time.time())
        board = self.kept.get(key)
        changed = None if board is None or board.cache is not cache else _changed(board, cache)
        if board is None or changed is None:
            board = self.kept[key] = judging.fresh(cache, scored)
            if len(self.kept) > BOARDS_KEPT:
                self.kept.popitem(last=False)
            return board
        self.kept.move_to_end(key)
        if board.scored is not scored:
            judging.rescore(board, scored, changed)
        elif changed:
            judging.judge(board, changed)
        return board


def _changed(board: Board, cache: ClusterCache) -> set[str] | None:
    """The nodes whose object, usage or placements changed since `board` was up to date; None when a
    node came or went (the board's order no longer holds)."""
    counts = _counts(cache)
    if board.counts == counts:
        return set()
    changed = set(cache.node_changes.since(board.counts[0]))
    changed.update(cache.usage_changes.since(board.counts[1]))
    changed.update(cache.placement_changes.since(board.counts[2]))
    if any(name not in board.index or name not in cache.nodes for name in changed):
        return None
    return changed


@dataclass(frozen=True, slots=True)
class _Judging:
    """What judging nodes for pods like `pod` reads besides the nodes, as `decide`'s node loop does."""

    pod: PodInfo
    snapshot: Snapshot
    scores: ScoreMemo
    herd: Mapping[str, Mapping[str, float]]
    filters: tuple[Filter, ...]
    incoming: IncomingLoad | None

    def fresh(self, cache: ClusterCache, scored: object) -> Board:
        """A board of every node of `cache`, judged."""
        names = list(cache.nodes)
        total = len(names)
        board = Board(
            cache,
            scored,
            names,
            {name: position for position, name in enumerate(names)},
            [None] * total,
            bytearray(total),
            bytearray(total),
            [None] * total,
            [None] * total,
            _counts(cache),
        )
        self.judge(board, names)
        return board

    def judge(self, board: Board, names: Iterable[str]) -> None:
        """Judge `names` anew: the filters, then the scores (with the herd load) and the thresholds
        against the pod's load."""
        self._score(board, self._filter(board, names))

    def rescore(self, board: Board, scored: object, changed: set[str]) -> None:
        """Bring `board` to this judging's snapshot: the changed nodes judged anew, and every other
        node that passed the filters scored anew (the filters read no metrics: their verdicts hold)."""
        carried = [
            name
            for name in compress(board.names, board.passed)
            if name not in changed  # judged below with the filters
        ]
        board.scored = scored
        self._score(board, carried + self._filter(board, changed))

    def _filter(self, board: Board, names: Iterable[str]) -> list[str]:
        """Run the filters on `names`; the ones that passed, to be scored."""
        cache, index = board.cache, board.index
        passed = []
        for name in names:
            position = index[name]
            node = board.nodes[position] = cache.nodes[name]
            status = run_filters(self.pod, node, cache.usage_of(name), self.filters)
            if status is None:
                board.passed[position] = 1
                passed.append(name)
            else:
                board.passed[position] = 0
                board.feasible[position] = 0
                board.results[position] = None
                board.reasons[position] = status.reason
        return passed

    def _score(self, board: Board, passed: list[str]) -> None:
        """Score the nodes that passed the filters, with the herd load, and check the thresholds against
        the pod's load."""
        cache, index = board.cache, board.index
        results = score_nodes(
            self.snapshot, passed, extra_load=self.herd, requested=requested_shares(cache), memo=self.scores
        )
        for result in self.incoming.filter(results) if self.incoming is not None else results:
            position = index[result.node]
            if result.reasons:
                board.feasible[position] = 0
                board.results[position] = None
                board.reasons[position] = result.reasons[0].key
            else:
                board.feasible[position] = 1
                board.results[position] = result
                board.reasons[position] = None
        board.counts = _counts(cache)


def _counts(cache: ClusterCache) -> tuple[int, int, int]:
    return cache.node_changes.count, cache.usage_changes.count, cache.placement_changes.count
