"""The rebalance proof's pure parts (bench/rebalance_proof.py's drift and objects,
bench/rebalance_measures.py, bench/rebalance_reporting.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from bench.quality_trace import TraceSettings, Usage, generate
from bench.rebalance_measures import (
    BudgetSample,
    Eviction,
    budget_violations,
    evictions_of,
    hot_node_seconds_since,
    metric_sums,
    repeat_evicted,
    short_samples,
    workload_of,
)
from bench.rebalance_proof import (
    DRIFT_CAP_MILLI,
    REBALANCE,
    SCALE_UNTIL,
    SERVICES_RAMP,
    _parse_args,
    drifted,
    drifting_services,
    growth_times,
    policy,
)
from bench.rebalance_reporting import markdown, verdict

from promsched.api.policies import SchedulingPolicySpec
from promsched.sandbox.node_metrics.usages import parse_usage

TRACE = generate(
    TraceSettings(nodes=20, minutes=4, seed=3, services_ramp=SERVICES_RAMP, scale_until=SCALE_UNTIL)
)


def test_a_drift_doubles_cpu_up_to_the_cap_and_never_lowers_it_and_the_sandbox_reads_it() -> None:
    base = Usage(cpu_milli=300, memory_bytes=1024, disk_busy=1.0, network=10.0)
    assert drifted(base, 2.0).cpu_milli == 600
    assert drifted(base, 2.0).memory_bytes == 1024
    assert drifted(Usage(DRIFT_CAP_MILLI * 3 // 4, 1, 1.0, 1.0), 2.0).cpu_milli == DRIFT_CAP_MILLI
    assert drifted(Usage(2000, 1, 1.0, 1.0), 2.0).cpu_milli == 2000
    assert parse_usage(drifted(base, 2.0).annotation()).milli_cpu == 600


def test_a_third_of_the_services_drift_the_same_ones_for_the_same_seed() -> None:
    services = [w.name for w in TRACE.workloads if w.kind == "service"]
    chosen = drifting_services(TRACE)
    assert chosen == drifting_services(generate(TRACE.settings))
    assert set(chosen) <= set(services)
    assert len(chosen) == round(len(services) / 3)


def test_services_reach_their_size_before_the_drift_can_come() -> None:
    services = [w for w in TRACE.workloads if w.kind == "service"]
    assert any(len(w.sizes) > 1 for w in services)
    assert max(at for w in services for at, _ in w.sizes) <= SCALE_UNTIL * TRACE.duration_s
    with pytest.raises(ValueError, match="scale_until"):
        TraceSettings(services_ramp=0.5, scale_until=0.4)


def test_growths_are_the_creations_and_scale_ups_from_the_replay_start() -> None:
    growths = growth_times(TRACE, 1000.0)
    service = next(w for w in TRACE.workloads if w.kind == "service")
    assert growths[service.name] == [1000.0 + at for at, _ in service.sizes]


def test_the_policy_rebalances_only_in_enforce_and_its_spec_is_valid() -> None:
    off = policy("http://prometheus", "Off")["spec"]
    enforce = policy("http://prometheus", "Enforce")["spec"]
    assert "rebalance" not in off
    assert enforce["rebalance"] == REBALANCE
    parsed = SchedulingPolicySpec.model_validate(enforce)
    assert parsed.rebalance.sustained_seconds == 60


def test_the_drift_must_come_after_every_service_arrived_and_before_the_end() -> None:
    assert _parse_args(["--minutes", "8", "--drift-at", "2.5"]).drift_at_s == 150
    for drift in ("1", "8"):
        with pytest.raises(SystemExit):
            _parse_args(["--minutes", "8", "--drift-at", drift])
    with pytest.raises(SystemExit):
        _parse_args(["--drift-factor", "0.5"])


def test_a_pod_belongs_to_the_replicaset_its_name_was_generated_from() -> None:
    assert workload_of("svc-007-x7k2p") == "svc-007"
    assert workload_of("lonely") == "lonely"


def event(pod: str, reason: str, stamp: str) -> dict[str, Any]:
    return {"reason": reason, "involvedObject": {"name": pod}, "eventTime": stamp}


def test_evictions_are_the_events_with_the_reason_once_per_pod_in_time_order() -> None:
    events = [
        event("svc-001-bbbbb", "Rebalanced", "2026-01-01T00:00:10.000000Z"),
        event("svc-001-aaaaa", "Rebalanced", "2026-01-01T00:00:05.000000Z"),
        event("svc-001-aaaaa", "Rebalanced", "2026-01-01T00:00:06.000000Z"),
        event("svc-002-ccccc", "Scheduled", "2026-01-01T00:00:01.000000Z"),
        {
            "reason": "Rebalanced",
            "involvedObject": {"name": "svc-003-ddddd"},
            "lastTimestamp": "2026-01-01T00:00:20Z",
        },
    ]
    found = evictions_of(events, "Rebalanced")
    assert [(e.pod, e.workload) for e in found] == [
        ("svc-001-aaaaa", "svc-001"),
        ("svc-001-bbbbb", "svc-001"),
        ("svc-003-ddddd", "svc-003"),
    ]
    assert found[1].at - found[0].at == pytest.approx(5.0)


def test_a_workload_is_a_repeat_when_two_of_its_evictions_are_less_than_the_window_apart() -> None:
    evictions = [
        Eviction("a-1", "a", 0.0),
        Eviction("a-2", "a", 599.0),
        Eviction("b-1", "b", 0.0),
        Eviction("b-2", "b", 600.0),
        Eviction("c-1", "c", 10.0),
    ]
    assert repeat_evicted(evictions) == {"a": 1}


def sample(at: float, budget: str, current: int, desired: int) -> BudgetSample:
    return BudgetSample(at, budget, current, desired, max(0, current - desired), desired + 1)


def test_a_violation_is_a_shortfall_after_an_eviction_that_no_growth_explains() -> None:
    samples = [
        sample(90.0, "a", 2, 3),  # before the eviction
        sample(105.0, "a", 3, 3),  # at the budget: no shortfall
        sample(110.0, "a", 2, 3),  # after the eviction: a violation
        sample(110.0, "b", 1, 3),  # b was evicted too, but had just grown
        sample(200.0, "a", 2, 3),  # long after
    ]
    evictions = [Eviction("a-1", "a", 100.0), Eviction("b-1", "b", 100.0)]
    found = budget_violations(samples, evictions, {"b": [95.0]})
    assert found == [samples[2]]
    assert short_samples(samples) == 4


def test_hot_node_seconds_count_the_steps_from_the_drift_on() -> None:
    grid = {"node-0": [90.0, 90.0, 50.0, 90.0], "node-1": [10.0, 85.0, 85.0, math.nan]}
    assert hot_node_seconds_since(grid, 100.0, 5.0, 100.0, 80.0) == 5.0 * 5
    assert hot_node_seconds_since(grid, 100.0, 5.0, 107.0, 80.0) == 5.0 * 2
    assert hot_node_seconds_since(grid, 100.0, 5.0, 110.0, 80.0) == 5.0 * 2


def test_counter_sums_by_label_from_the_exposition_text() -> None:
    text = "\n".join(
        [
            "# HELP promsched_rebalance_blocked_total Moves not made.",
            'promsched_rebalance_blocked_total{reason="NoDestination"} 3.0',
            'promsched_rebalance_blocked_total{reason="PodDisruptionBudget"} 1.0',
            'promsched_rebalance_blocked_total_created{reason="NoDestination"} 1.7e9',
            'promsched_rebalance_evictions_total{policy="quality",reason="cpu"} 2.0',
            'promsched_rebalance_evictions_total{policy="other",reason="cpu"} 1.0',
        ]
    )
    assert metric_sums(text, "promsched_rebalance_blocked_total", "reason") == {
        "NoDestination": 3.0,
        "PodDisruptionBudget": 1.0,
    }
    assert metric_sums(text, "promsched_rebalance_evictions_total", "reason") == {"cpu": 3.0}


def run(mode: str, hot_after: float, repeats: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "mode": mode,
        "hot_cpu_node_s_after_drift": hot_after,
        "evictions": 4 if mode == "Enforce" else 0,
        "repeat_evicted": repeats or {},
        "budget_violations": [],
        "blocked_by_reason": {"PodDisruptionBudget": 2.0} if mode == "Enforce" else {},
    }


def results(*runs: dict[str, Any]) -> dict[str, Any]:
    return {
        "settings": {
            "trace": {"nodes": 20, "minutes": 4, "seed": 3},
            "drift_at_s": 90.0,
            "drift": {"factor": 2.0, "cap_milli": DRIFT_CAP_MILLI},
            "drifting": ["svc-001"],
            "rebalance": REBALANCE,
            "step": 5.0,
        },
        "trace": {"services": 3},
        "kubernetes": "v1.37.2",
        "revision": {"commit": "abc"},
        "runs": list(runs),
    }


def test_the_target_is_half_the_hot_node_seconds_with_no_repeats() -> None:
    assert verdict(results(run("Off", 1000), run("Enforce", 500)))["status"] == "met"
    assert verdict(results(run("Off", 1000), run("Enforce", 501)))["status"] == "NOT met"
    assert verdict(results(run("Off", 1000), run("Enforce", 100, {"svc-001": 1})))["status"] == "NOT met"
    assert verdict(results(run("Off", 1000)))["status"] == "not measured"


def test_the_report_shows_both_modes_side_by_side_with_the_ratio() -> None:
    text = markdown(results(run("Off", 1000), run("Enforce", 400)))
    row = next(line for line in text.splitlines() if line.startswith("| hot-node-seconds after"))
    assert row.endswith("| 1000 | 400 | 0.40 |")
    refused = next(line for line in text.splitlines() if "refused by a PodDisruptionBudget" in line)
    assert "| 0 | 2 |" in refused
    assert "**met**" in text


def test_the_report_shows_the_cycles_run_and_their_mean_length() -> None:
    enforce = {
        **run("Enforce", 400),
        "cycles_by_policy": {"quality": 40.0},
        "cycle_seconds_by_policy": {"quality": 2.0},
    }
    text = markdown(results(run("Off", 1000), enforce))
    cycles = next(line for line in text.splitlines() if line.startswith("| rebalance cycles run"))
    assert cycles.endswith("| - | 40 | - |")
    seconds = next(line for line in text.splitlines() if line.startswith("| seconds per rebalance cycle"))
    assert "| - | 0.05 |" in seconds
