"""Issue 40's outage scenario's bookkeeping (bench/quality_outage.py) on fixed data: the window in the
middle of the trace, the nodes' CPU worked out from placements while Prometheus is down, the waits of
the pods that arrived in the window, promsched's recovery and what it still filtered after it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from bench.quality_measures import PodLives
from bench.quality_outage import (
    Outage,
    OutageWindow,
    centred,
    evictions,
    filtered_after,
    outage_rows,
    outage_targets,
    placed_cpu,
    placed_hot_node_seconds,
    recovery_s,
    waits_in,
)

ALLOCATABLE = 4000  # millicores


def _lives() -> PodLives:
    """a: bound to node-0 at 100 until 130; b: bound to node-0 at 110; c: arrives at 105, bound to node-1
    at 125; d: arrives at 115 and never bound."""
    lives = PodLives()
    for name, seen in (("a", 95.0), ("b", 100.0), ("c", 105.0), ("d", 115.0)):
        lives.observe("ADDED", {"metadata": {"name": name}, "spec": {}}, seen)
    for name, node, at in (("a", "node-0", 100.0), ("b", "node-0", 110.0), ("c", "node-1", 125.0)):
        lives.observe("MODIFIED", {"metadata": {"name": name}, "spec": {"nodeName": node}}, at)
    lives.observe("DELETED", {"metadata": {"name": "a"}, "spec": {"nodeName": "node-0"}}, 130.0)
    return lives


USAGE = {"a": 800, "b": 400, "c": 2000, "d": 4000}  # millicores: 20, 10, 50, 100 points of a node
BACKGROUND = {"node-0": 55.0, "node-1": 40.0, "node-2": 90.0}


def test_the_outage_sits_in_the_middle_of_the_trace() -> None:
    assert centred(360.0, 90.0) == OutageWindow(135.0, 90.0)
    assert centred(360.0, 90.0).until_s == 225.0
    with pytest.raises(ValueError, match="does not fit"):
        centred(60.0, 60.0)


def test_node_cpu_in_the_outage_is_background_plus_the_pods_running_there() -> None:
    lives = _lives()

    assert placed_cpu(lives, USAGE, BACKGROUND, ALLOCATABLE, 99.0) == BACKGROUND
    assert placed_cpu(lives, USAGE, BACKGROUND, ALLOCATABLE, 112.0) == {
        "node-0": 85.0,
        "node-1": 40.0,
        "node-2": 90.0,
    }
    # a gone at 130, c running on node-1 since 125; d never bound counts nowhere.
    assert placed_cpu(lives, USAGE, BACKGROUND, ALLOCATABLE, 130.0) == {
        "node-0": 65.0,
        "node-1": 90.0,
        "node-2": 90.0,
    }


def test_hot_node_seconds_count_the_steps_of_the_window_only() -> None:
    lives = _lives()

    # Steps at 100, 105 ... 135 (the window's end excluded): node-2 hot at all 8; node-0 (85) from 110
    # until a leaves at 130: 110, 115, 120, 125; node-1 (90) from 125: 125, 130, 135.
    assert placed_hot_node_seconds(lives, USAGE, BACKGROUND, ALLOCATABLE, (100.0, 140.0), 5.0) == 5.0 * (
        8 + 4 + 3
    )
    assert placed_hot_node_seconds(lives, USAGE, BACKGROUND, ALLOCATABLE, (100.0, 100.0), 5.0) == 0.0


def test_waits_in_the_window_are_those_of_the_pods_that_arrived_in_it() -> None:
    measured = waits_in(_lives(), (100.0, 120.0), 200.0)

    # b (10 s), c (20 s, bound after the window) and d (85 s to the end, unbound); a arrived before.
    assert measured["pods_arrived"] == 3
    assert measured["waiting_at_end_of_outage"] == 2
    assert measured["wait_mean_s"] == pytest.approx((10.0 + 20.0 + 85.0) / 3)
    assert measured["wait_max_s"] == 85.0


def test_recovery_is_the_first_fresh_sample_after_prometheus_answers_again() -> None:
    # (time, snapshot age): fresh before the outage, stale through it, fresh again 12 s after 200.
    samples = [(100.0, 3.0), (150.0, 50.0), (200.0, 100.0), (204.0, 104.0), (212.0, 2.0), (216.0, 6.0)]

    assert recovery_s(samples, 200.0, 15.0) == 12.0
    assert recovery_s(samples, 213.0, 15.0) == 3.0
    assert math.isnan(recovery_s(samples[:4], 200.0, 15.0))


def test_what_was_filtered_counts_only_decisions_after_recovery() -> None:
    decisions = [
        {"time": "2026-12-04T03:00:20Z", "filtered": [{"reason": "threshold of cpu exceeded", "count": 2}]},
        {"time": "2026-12-04T03:00:10Z", "filtered": [{"reason": "threshold of cpu exceeded", "count": 5}]},
        {"time": "2026-12-04T02:59:00Z", "filtered": [{"reason": "metrics missing", "count": 9}]},
        {"time": "2026-12-04T03:00:30Z"},
        # A fit on requests, not a reading: not counted.
        {"time": "2026-12-04T03:00:40Z", "filtered": [{"reason": "Insufficient cpu", "count": 6}]},
    ]
    since = 1796353210.0  # 2026-12-04T03:00:10Z

    assert filtered_after(decisions, since) == {"threshold of cpu exceeded": 5}
    assert filtered_after(decisions, since + 60) == {}


def test_evictions_are_the_events_that_record_one() -> None:
    events = [
        {"reason": "Rebalanced"},
        {"reason": "Scheduled"},
        {"reason": "Preempted"},
        {"reason": "Killing"},
    ]

    assert evictions(events) == 2


def _run(
    variant: str, hot: float, wait_max: float, recovery: float = math.nan, **extra: Any
) -> dict[str, Any]:
    outage = {
        "outage_s": 90.0,
        "hot_cpu_node_s": hot,
        "pods_arrived": 4.0,
        "waiting_at_end_of_outage": 0.0,
        "wait_mean_s": 0.5,
        "wait_max_s": wait_max,
        "recovery_s": recovery,
    }
    return {
        "variant": variant,
        "label": variant,
        "outage": outage,
        "refresh_s": 15.0,
        "evictions": 0,
        **extra,
    }


def test_outage_targets_compare_promsched_with_kube_scheduler_and_judge_its_recovery() -> None:
    met = [_run("promsched", 104.0, 2.0, 9.0, filtered_after_recovery={}), _run("ks-default", 100.0, 1.5)]
    assert [found["status"] for found in outage_targets(met)] == ["met"] * 4

    missed = [
        _run("promsched", 106.0, 3.0, 16.0, filtered_after_recovery={"threshold of cpu exceeded": 1}),
        _run("ks-default", 100.0, 1.5),
    ]
    assert [found["status"] for found in outage_targets(missed)] == ["NOT met"] * 4
    assert outage_targets([]) == []


def test_the_outage_table_has_a_row_per_seed_and_scheduler() -> None:
    runs = [
        (15, _run("promsched", 104.0, 2.0, 9.0, filtered_after_recovery={})),
        (15, _run("ks-default", 100.0, 1.5)),
    ]

    lines = outage_rows(runs)

    assert lines[2] == "| 15 | promsched | 90 | 104 | 4 | 0 | 0.50 | 2.0 | 9.0 | 0 | none |"
    assert lines[3] == "| 15 | ks-default | 90 | 100 | 4 | 0 | 0.50 | 1.5 | - | 0 | - |"


def test_decisions_are_gathered_as_the_status_passes_them() -> None:
    # The status keeps the last 10: a decision pushed out between two reads still counts.
    def decision(second: int, filtered: int = 0) -> dict[str, Any]:
        reasons = [{"reason": "threshold of cpu exceeded", "count": filtered}] if filtered else []
        return {"pod": f"ns/p{second}", "time": f"2026-12-04T03:00:{second:02d}Z", "filtered": reasons}

    outage = Outage(OutageWindow(60.0, 120.0), Path("/nonexistent"), "http://127.0.0.1:1")
    outage.saw_decisions([decision(second, filtered=3 if second == 11 else 0) for second in range(10, 20)])
    outage.saw_decisions([decision(second) for second in range(15, 25)])

    assert len(outage.decisions) == 15
    since = 1796353210.0  # 2026-12-04T03:00:10Z
    assert filtered_after(list(outage.decisions.values()), since) == {"threshold of cpu exceeded": 3}
