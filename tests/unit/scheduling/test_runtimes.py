"""A policy's runtime: one decision memo per snapshot, starting from the scores its refresher worked out
and the previous memo's boards. The runtimes: which pending pods are the scheduler's to place."""

from __future__ import annotations

import dataclasses
import time

from prometheus_client import REGISTRY

from promsched.api.statuses import ConditionType
from promsched.metrics.scoring import ScoreMemo, prescore, score_nodes
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.boards import Board
from promsched.scheduling.loop_lag_watching import Refreshes
from promsched.scheduling.policies.recording import PolicyStatus
from promsched.scheduling.policies.runtimes import (
    SHADOWED_KEPT,
    PolicyRuntime,
    PolicyRuntimes,
    _PolicyObserver,
    policy_conditions,
)
from support.fake_apis import FakeSender
from support.objects import pod
from support.polling import eventually
from support.snapshots import cpu_snapshot


class ScoredRefresher:
    """A refresher whose latest snapshot was scored when taken, as `Refresher.refresh` does."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.latest = snapshot
        self.scores = prescore(snapshot, ["node-0", "node-1"])

    def scores_for(self, snapshot: Snapshot) -> ScoreMemo:
        return self.scores if snapshot is self.latest else ScoreMemo()


def board_with_scores(scored: object) -> Board:
    return Board.unjudged_of(ClusterCache(), scored)


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


def test_a_succeeded_memo_lets_go_of_its_scores_once_its_snapshot_is_not_the_latest() -> None:
    snapshot = cpu_snapshot({"node-0": 10, "node-1": 20})
    refresher = ScoredRefresher(snapshot)
    runtime = PolicyRuntime("p", "", PolicyStatus(history=10), refresher=refresher)  # type: ignore[arg-type]
    scored = runtime.memo_for(snapshot).scores.scored
    assert scored is not None
    assert scored.results

    # A rebalance cycle's older snapshot in between: the latest's scores stay for the next pod.
    runtime.memo_for(cpu_snapshot({"node-0": 5}))
    memo = runtime.memo_for(snapshot)
    assert memo.scores.scored is scored
    assert scored.results

    # A refresh: the last snapshot's scores are freed on the metrics worker.
    refresher.latest = cpu_snapshot({"node-0": 30})
    later_memo = runtime.memo_for(refresher.latest)
    assert memo.scores.scored is None
    eventually(lambda: len(scored.results), lambda left: left == 0, timeout=30, what="the scores freed")
    # The next snapshot's memo is whole: its node scored anew where looked up.
    assert [
        result.node for result in score_nodes(later_memo.snapshot, ["node-0"], memo=later_memo.scores)
    ] == ["node-0"]


def runtimes_serving(scheduler_name: str, namespaces: frozenset[str] | None = None) -> PolicyRuntimes:
    cache = ClusterCache()
    runtimes = PolicyRuntimes(
        FakeSender(), cache, spawn=lambda _: None, on_snapshot=lambda **_: None, namespaces=namespaces
    )
    runtimes.owners = {scheduler_name: PolicyRuntime("p", "", PolicyStatus(history=10))}
    return runtimes


def test_the_pods_to_place_are_those_of_a_served_name_in_a_placed_namespace_ungated() -> None:
    runtimes = runtimes_serving("promsched", frozenset({"shop"}))
    assert runtimes.schedules(pod("web", "shop", schedulerName="promsched"))
    assert not runtimes.schedules(pod("web", "shop", schedulerName="another"))
    assert not runtimes.schedules(pod("web", "other", schedulerName="promsched"))
    assert not runtimes.schedules(
        pod("web", "shop", schedulerName="promsched", schedulingGates=[{"name": "wait"}])
    )
    assert runtimes_serving("promsched").schedules(pod("web", "other", schedulerName="promsched"))


def test_a_pod_a_shadow_policy_decided_is_not_placed_again_while_remembered() -> None:
    runtimes = runtimes_serving("promsched")
    first, later = pod("first", schedulerName="promsched"), pod("later", schedulerName="promsched")
    runtimes.shadow(first.uid)
    assert not runtimes.schedules(first)
    for index in range(SHADOWED_KEPT):
        runtimes.shadow(f"uid-{index}")
    assert runtimes.schedules(first), "the oldest is forgotten past SHADOWED_KEPT"
    assert runtimes.schedules(later)


def test_query_warnings_are_said_in_metrics_complete_without_stopping_scheduling() -> None:
    snapshot = cpu_snapshot({"node-0": 10, "node-1": 20})
    cpu = snapshot.plugins["cpu"]
    warned_cpu = dataclasses.replace(
        cpu, report=dataclasses.replace(cpu.report, warnings=("results truncated",))
    )
    warned = dataclasses.replace(snapshot, plugins={**snapshot.plugins, "cpu": warned_cpu})
    runtime = PolicyRuntime("p", "", PolicyStatus(history=10), refresher=ScoredRefresher(warned))  # type: ignore[arg-type]

    conditions = {item.type: item for item in policy_conditions(runtime, ["node-0", "node-1"])}
    complete = conditions[ConditionType.METRICS_COMPLETE]
    assert (complete.status, complete.message) == ("True", "cpu: Prometheus warns: results truncated")
    assert conditions[ConditionType.READY].status == "True"


def test_a_warned_query_is_counted_per_policy_and_plugin() -> None:
    runtimes = runtimes_serving("promsched")
    observer = _PolicyObserver(runtimes, PolicyRuntime("warned", "", PolicyStatus(history=10)))
    labels = {"policy": "warned", "plugin": "cpu"}
    before = REGISTRY.get_sample_value("promsched_prometheus_query_warnings_total", labels) or 0.0
    observer.query_warned("cpu", ("partial response",))
    assert REGISTRY.get_sample_value("promsched_prometheus_query_warnings_total", labels) == before + 1


def test_every_policys_refreshes_are_counted_for_the_loop_lag_watcher() -> None:
    refreshes = Refreshes()
    runtimes = PolicyRuntimes(
        FakeSender(), ClusterCache(), spawn=lambda _: None, on_snapshot=lambda **_: None, refreshes=refreshes
    )
    one, other = (
        _PolicyObserver(runtimes, PolicyRuntime(name, "", PolicyStatus(history=10))) for name in "ab"
    )
    one.refresh_started()
    other.refresh_started()
    one.refresh_ended()
    assert (refreshes.started, refreshes.finished) == (2, 1)
