"""A policy's runtime: one decision memo per snapshot, starting from the scores its refresher worked out
and the previous memo's boards."""

from __future__ import annotations

import time

from promsched.metrics.scoring import ScoreMemo, prescore
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.boards import Board
from promsched.scheduling.policies.recording import PolicyStatus
from promsched.scheduling.policies.runtimes import PolicyRuntime
from support.snapshots import cpu_snapshot


class ScoredRefresher:
    """A refresher whose latest snapshot was scored when taken, as `Refresher.refresh` does."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.latest = snapshot
        self.scores = prescore(snapshot, ["node-0", "node-1"])

    def scores_for(self, snapshot: Snapshot) -> ScoreMemo:
        return self.scores if snapshot is self.latest else ScoreMemo()


def board_with_scores(scored: object) -> Board:
    return Board(ClusterCache(), scored, [], {}, [], bytearray(), bytearray(), [], [], (0, 0, 0))


def test_a_new_snapshot_starts_its_memo_from_the_refreshers_scores() -> None:
    snapshot = cpu_snapshot({"node-0": 10, "node-1": 20})
    refresher = ScoredRefresher(snapshot)
    runtime = PolicyRuntime("p", "", PolicyStatus(history=10), refresher=refresher)  # type: ignore[arg-type]

    memo = runtime.memo_for(snapshot)
    assert memo.scores is refresher.scores
    assert runtime.memo_for(snapshot) is memo

    # A board used under this snapshot's scores, and one left from an older snapshot.
    current, stale = board_with_scores(memo.scores.at(snapshot, time.time())), board_with_scores(object())
    memo.boards.kept.update({"current": current, "stale": stale})

    later = cpu_snapshot({"node-0": 30})
    later_memo = runtime.memo_for(later)
    assert later_memo.scores is not refresher.scores
    # Filter verdicts hold across snapshots; an older snapshot's results are not kept alive.
    assert dict(later_memo.boards.kept) == {"current": current}
    runtime.refresher = None
    assert runtime.memo_for(snapshot).scores.scored is None
