"""The quality benchmark's pure parts (bench/quality_trace.py, bench/quality_measures.py,
bench/quality_reporting.py): the seeded trace, the measures over node series, and the targets."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from bench.quality_measures import (
    PodLives,
    grid_of,
    hot_nodes,
    node_measures,
    percentile,
    wait_measures,
)
from bench.quality_replaying import workload_object
from bench.quality_reporting import better_trimaran, markdown, targets, trace_summary
from bench.quality_trace import (
    CPU_RATIO_BANDS,
    HOT_REQUEST_LIMIT_MILLI,
    USAGE_ANNOTATION,
    TraceSettings,
    Usage,
    generate,
)

from promsched.sandbox.node_metrics.usages import parse_usage

SHORT = TraceSettings(nodes=20, minutes=2, seed=3)


def test_the_same_seed_gives_the_same_trace_and_another_seed_another() -> None:
    assert generate(SHORT) == generate(SHORT)
    assert generate(SHORT).events != generate(dataclasses.replace(SHORT, seed=4)).events


@pytest.mark.parametrize("seed", [1, 15, 99])
def test_the_cluster_ends_between_60_and_80_percent_requested(seed: int) -> None:
    trace = generate(TraceSettings(nodes=100, minutes=10, seed=seed))
    cpu, _ = trace.requested_share_at(trace.duration_s)
    assert 0.6 <= cpu <= 0.8
    # and it fills up over the trace, from (almost) nothing
    assert trace.requested_share_at(0.0)[0] < 0.2


def test_services_run_throughout_and_batch_jobs_end_after_they_arrive() -> None:
    trace = generate(TraceSettings(nodes=100, minutes=10, seed=15))
    services = [w for w in trace.workloads if w.kind == "service"]
    jobs = [w for w in trace.workloads if w.kind == "batch"]
    assert services
    assert jobs
    assert all(w.end_s is None for w in services)
    assert any(w.end_s is not None for w in jobs)
    assert all(w.end_s is None or w.end_s > w.arrive_s for w in jobs)
    # a service's replicas only grow, and every size change is an event
    for service in services:
        counts = [replicas for _, replicas in service.sizes]
        assert counts == sorted(counts)
    assert len(trace.events) == sum(len(w.sizes) + (w.end_s is not None) for w in trace.workloads)
    # events come in time order; a job's delete sorts before a create at the same second
    assert [e.at_s for e in trace.events] == sorted(e.at_s for e in trace.events)


def test_usage_to_request_ratios_are_spread_as_the_bands_say() -> None:
    trace = generate(TraceSettings(nodes=100, minutes=10, seed=15))
    summary = trace_summary(trace)
    low_share = CPU_RATIO_BANDS[0][0]
    assert summary["pods_cpu_ratio_below_0_4"] > low_share - 0.2
    assert 0.03 < summary["pods_cpu_ratio_above_1_5"] < 0.3
    for workload in trace.workloads:
        assert 0.1 <= workload.cpu_ratio <= 3.01
        if workload.cpu_ratio > 1.0:
            assert workload.cpu_request_milli <= HOT_REQUEST_LIMIT_MILLI
        assert 0.5 < workload.usage.memory_bytes / workload.memory_request_bytes < 0.95


def test_the_usage_annotation_reads_back_through_the_sandbox_parser() -> None:
    usage = Usage(cpu_milli=1500, memory_bytes=2 * 1024**3, disk_busy=1.25, network=2e6)
    parsed = parse_usage(usage.annotation())
    stated = (parsed.milli_cpu, parsed.memory, parsed.disk_busy, parsed.network)
    assert stated == (1500, 2 * 1024**3, 1.25, 2_000_000)


def test_bad_trace_settings_name_the_field() -> None:
    with pytest.raises(ValueError, match="minutes"):
        TraceSettings(minutes=0)
    with pytest.raises(ValueError, match="requested_at_end"):
        TraceSettings(requested_at_end=1.5)


def test_workloads_become_replicasets_whose_pods_carry_the_usage_annotation() -> None:
    trace = generate(TraceSettings(nodes=100, minutes=10, seed=15))
    for workload in (
        next(w for w in trace.workloads if w.kind == "service"),
        next(w for w in trace.workloads if w.kind == "batch"),
    ):
        made = workload_object(workload, "ns", "bench-x", 3)
        assert (made["kind"], made["spec"]["replicas"]) == ("ReplicaSet", 3)
        assert made["metadata"]["labels"]["promsched.io/bench-kind"] == workload.kind
        template = made["spec"]["template"]
        assert template["metadata"]["labels"]["app"] == made["spec"]["selector"]["matchLabels"]["app"]
        assert template["metadata"]["annotations"][USAGE_ANNOTATION] == workload.usage.annotation()
        assert template["spec"]["schedulerName"] == "bench-x"
        requests = template["spec"]["containers"][0]["resources"]["requests"]
        assert requests["cpu"] == f"{workload.cpu_request_milli}m"
        assert requests["memory"] == str(workload.memory_request_bytes)


# ----- measures ------------------------------------------------------------------------------------------


def _series(instance: str, start: float, values: list[float], step: float = 5.0) -> dict[str, Any]:
    return {
        "metric": {"instance": instance},
        "values": [[start + k * step, str(v)] for k, v in enumerate(values)],
    }


def test_grid_of_aligns_series_on_the_steps_and_marks_missing_samples() -> None:
    result = [_series("node-1:9100", 100.0, [10, 20, 30]), _series("node-0:9100", 105.0, [50, 60])]
    grid = grid_of(result, 100.0, 5.0, 3)
    assert list(grid) == ["node-0", "node-1"]
    assert grid["node-1"] == [10.0, 20.0, 30.0]
    assert math.isnan(grid["node-0"][0])
    assert grid["node-0"][1:] == [50.0, 60.0]


def test_hot_node_seconds_count_nodes_above_the_threshold_at_each_step() -> None:
    cpu = {"a": [85.0, 85.0, 50.0], "b": [90.0, 70.0, 95.0], "c": [80.0, 80.0, 80.0]}
    memory = {"a": [95.0, 50.0, 50.0], "b": [10.0, 10.0, 10.0], "c": [10.0, 10.0, math.nan]}
    assert hot_nodes(cpu, 80.0) == [2, 1, 1]
    measures = node_measures(cpu, memory, step=5.0)
    assert measures["hot_cpu_node_s"] == 5.0 * 4  # 80 itself is not above 80
    assert measures["hot_memory_node_s"] == 5.0
    assert measures["cpu_peak"] == 95.0
    assert measures["cpu_max"] == pytest.approx((90 + 85 + 95) / 3)
    # spread at each step, averaged: equal loads spread 0
    flat = node_measures({"a": [50.0, 60.0], "b": [50.0, 60.0]}, {"a": [1.0, 1.0], "b": [1.0, 1.0]}, 5.0)
    assert flat["cpu_std"] == 0.0
    assert flat["memory_std"] == 0.0
    assert flat["hot_cpu_node_s"] == 0.0


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([0.0, 10.0], 0.5) == 5.0
    assert percentile(list(range(101)), 0.95) == 95.0
    assert math.isnan(percentile([], 0.5))


def test_waits_run_until_bound_deleted_or_the_end() -> None:
    lives = PodLives()
    pod = {"metadata": {"name": "a"}, "spec": {}}
    lives.observe("ADDED", pod, 10.0)
    lives.observe("MODIFIED", {"metadata": {"name": "a"}, "spec": {"nodeName": "node-1"}}, 12.0)
    lives.observe("ADDED", {"metadata": {"name": "b"}, "spec": {}}, 20.0)
    lives.observe("DELETED", {"metadata": {"name": "b"}, "spec": {}}, 25.0)
    lives.observe("ADDED", {"metadata": {"name": "c"}, "spec": {}}, 30.0)
    assert lives.waits(40.0) == {"a": 2.0, "b": 5.0, "c": 10.0}
    assert lives.pending_at(40.0) == ["c"]
    measures = wait_measures(lives, 40.0)
    assert measures["pods_bound"] == 1
    assert measures["pending_at_end"] == 1
    assert measures["pending_at_end_wait_s"] == 10.0
    assert measures["wait_total_s"] == 17.0
    assert lives.node == {"a": "node-1"}


# ----- targets and report --------------------------------------------------------------------------------


def _run(key: str, label: str, hot: float, std: float, wait: float) -> dict[str, Any]:
    return {
        "variant": key,
        "label": label,
        "hot_cpu_node_s": hot,
        "cpu_std": std,
        "wait_mean_s": wait,
        "errors": [],
    }


def _results(*runs: dict[str, Any]) -> dict[str, Any]:
    trace = generate(SHORT)
    return {
        "settings": {"trace": dataclasses.asdict(SHORT), "step": 5.0},
        "trace": trace_summary(trace),
        "kubernetes": "v1.37.2",
        "revision": {"commit": "abcdef0123", "changed": []},
        "machine": {"cpus": 2},
        "wall_s": 600.0,
        "runs": list(runs),
    }


def test_targets_compare_promsched_with_kube_scheduler_and_the_better_trimaran() -> None:
    results = _results(
        _run("promsched", "promsched, estimation on", 100.0, 6.0, 1.0),
        _run("promsched-noest", "promsched, estimation off", 150.0, 7.0, 1.0),
        _run("ks-default", "kube-scheduler", 300.0, 10.0, 1.0),
        _run("trimaran-tlp", "TLP", 120.0, 8.0, 1.0),
        _run("trimaran-lvrb", "LVRB", 90.0, 8.0, 1.0),
    )
    results["runs"][3] |= {"trimaran_nodes_scored_from_metrics": 20, "trimaran_metrics_failures": 0}
    assert "TLP: scored 20 of 20 nodes from their metrics; 0 metric failures" in markdown(results)
    better = better_trimaran(results)
    assert better is not None
    assert better["variant"] == "trimaran-lvrb"
    status = [target["status"] for target in targets(results)]
    # hot <= 0.5x kube: met; below LVRB's 90: not met; std 0.6x: met; waits equal: met; on < off: met
    assert status == ["met", "NOT met", "met", "met", "met"]


def test_targets_not_run_are_not_measured_and_the_table_shows_ratios() -> None:
    results = _results(
        _run("promsched", "promsched, estimation on", 100.0, 6.0, 5.0),
        _run("ks-default", "kube-scheduler", 300.0, 10.0, 2.0),
    )
    status = {target["target"]: target["status"] for target in targets(results)}
    assert status["CPU hot-node-seconds below the better Trimaran plugin's"] == "not measured"
    assert status["estimation on: fewer CPU hot-node-seconds than off"] == "not measured"
    pending = next(name for name in status if name.startswith("pending time"))
    assert status[pending] == "NOT met"
    text = markdown(results)
    assert "promsched / kube-scheduler" in text
    hot_row = next(line for line in text.splitlines() if line.startswith("| hot-node-seconds, CPU"))
    assert hot_row.endswith("| 100 | 300 | 0.33 |")
