"""Every node's verdict and score for pods alike, kept across the pods of a burst.

Most pods of a burst share their spec, and between two of them only the node the first went to (and
the few the watches brought news of) changed. A board holds, for pods alike in what the node filters
read of them and in their load against the thresholds, each node's outcome under one snapshot:
filtered (why) or scored. The cache's change feeds (the nodes whose object, counted pods or placements
changed) mark nodes due for judging; a new snapshot changes no filter's verdict, so the runtime hands
the boards to the next snapshot's memo and only the nodes that passed the filters are marked due for
scoring. A search judges the due nodes it reaches, and no others: a decision costs the nodes that
changed in its window plus slices over the nodes it searches, not a walk over each of them, and the
first pod on a new snapshot (or of a new spec) rescores the few hundred nodes it searches, not every
node while the event loop waits (12-16 ms at 5000 nodes).

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
    filtered. A node due for judging or scoring counts as feasible until a search reaches it, so a
    search's window holds at least the nodes it would hold judged."""

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
    unjudged: bytearray  # 1 where the filters are due (and the score: such a node is unscored too)
    unscored: bytearray  # 1 where the score and thresholds are due
    judging: _Judging | None = None  # how the due nodes are judged: the latest pod's like this board's

    @classmethod
    def unjudged_of(cls, cache: ClusterCache, scored: object) -> Board:
        """A board of every node of `cache`, each due for judging."""
        names = list(cache.nodes)
        total = len(names)
        return cls(
            cache,
            scored,
            names,
            {name: position for position, name in enumerate(names)},
            [None] * total,
            bytearray(b"\x01") * total,
            bytearray(b"\x01") * total,
            [None] * total,
            [None] * total,
            _counts(cache),
            bytearray(b"\x01") * total,
            bytearray(b"\x01") * total,
        )

    def rescored(self, scored: object) -> None:
        """Under `scored`, a new snapshot's (or later) scores: every node that passed the filters is due
        for scoring (the filters read no metrics: their verdicts hold)."""
        self.scored = scored
        self.unscored = bytearray(self.passed)
        self.feasible = bytearray(self.passed)

    def unjudge(self, names: Iterable[str]) -> None:
        """Mark `names`, which changed, due for judging."""
        index = self.index
        for name in names:
            position = index[name]
            self.unjudged[position] = self.unscored[position] = 1
            self.passed[position] = self.feasible[position] = 1

    def search(self, start: int, wanted: int, rejected: Mapping[str, Status] | None = None) -> Search:
        """The nodes from `start` (wrapping around) until `wanted` feasible ones are found, or all. What
        may lift the filtered nodes' rejections is left out: it matters to a pod that fits nowhere, and
        `decide` judges such a pod node by node, for preemption. `rejected`: the nodes the pod's cluster
        checks reject, which count as `decide`'s node walk counts them (after the filters, before the
        metric thresholds)."""
        total = len(self.names)
        start %= total
        # Judge the due nodes of the window until it holds none. A due node counts as feasible: the window
        # stands when those judged stay so, and widens when one is filtered.
        while True:
            feasible, overruled = self._overruled(rejected)
            searched = _searched(feasible, start, wanted, total)
            segments = [(start, min(start + searched, total))]
            if start + searched > total:
                segments.append((0, start + searched - total))
            due = [position for low, high in segments for position in _flagged(self.unscored, low, high)]
            if not due:
                break
            self._judge(due)
            if all(map(self.feasible.__getitem__, due)):
                break
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

    def _overruled(self, rejected: Mapping[str, Status] | None) -> tuple[bytearray, dict[int, str]]:
        """The nodes' feasibility with those `rejected` that passed the filters left out, and those
        (position -> the check's reason)."""
        if not rejected:
            return self.feasible, {}
        feasible = bytearray(self.feasible)
        overruled: dict[int, str] = {}
        index, passed = self.index, self.passed  # looked up once: a check may reject most nodes
        for name, status in rejected.items():
            position = index[name]
            if passed[position]:
                feasible[position] = 0
                overruled[position] = status.reason
        return feasible, overruled

    def _judge(self, due: list[int]) -> None:
        """Judge the nodes at `due`: the filters where due, then the scores of those that passed."""
        judging = self.judging
        assert judging is not None  # nodes are due only on a board `Boards.board` handed a judging
        names, unjudged, unscored = self.names, self.unjudged, self.unscored
        to_filter = [names[position] for position in due if unjudged[position]]
        to_score = [names[position] for position in due if not unjudged[position]]
        for position in due:
            unjudged[position] = unscored[position] = 0
        judging.score(self, to_score + judging.filter(self, to_filter))


def _flagged(flags: bytearray, low: int, high: int) -> list[int]:
    """The positions in [low, high) flagged 1: found byte by byte in C, for a search passes few."""
    found = []
    position = flags.find(1, low, high)
    while position >= 0:
        found.append(position)
        position = flags.find(1, position + 1, high)
    return found


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
        alive, and they are rebuilt afresh when a pod like theirs comes again. The boards carried let go
        of their judging, which holds the ending snapshot (`board` hands each a new one before a search)."""
        carried = OrderedDict((key, board) for key, board in self.kept.items() if board.scored is scored)
        for board in carried.values():
            board.judging = None
        return Boards(carried)

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
        """The board for pods like `pod`, its nodes changed since it was last read (and, under newer
        scores, every node that passed the filters) due, to be judged as a search reaches them with
        `herd` (the herd loads, up to date with the cache's placements)."""
        scored = scores.at(snapshot, time.time())
        board = self.kept.get(key)
        changed = None if board is None or board.cache is not cache else _changed(board, cache)
        if board is None or changed is None:
            board = self.kept[key] = Board.unjudged_of(cache, scored)
            if len(self.kept) > BOARDS_KEPT:
                self.kept.popitem(last=False)
        else:
            self.kept.move_to_end(key)
            if board.scored is not scored:
                board.rescored(scored)
            board.unjudge(changed)
            board.counts = _counts(cache)
        board.judging = _Judging(pod, snapshot, scores, herd, filters, incoming)
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

    def filter(self, board: Board, names: Iterable[str]) -> list[str]:
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

    def score(self, board: Board, passed: list[str]) -> None:
        """Score the nodes that passed the filters, with the herd load, and check the thresholds against
        the pod's load."""
        index = board.index
        results = score_nodes(
            self.snapshot,
            passed,
            extra_load=self.herd,
            requested=requested_shares(board.cache),
            memo=self.scores,
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


def _counts(cache: ClusterCache) -> tuple[int, int, int]:
    return cache.node_changes.count, cache.usage_changes.count, cache.placement_changes.count
