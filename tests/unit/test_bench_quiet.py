"""The parked-pods benchmark's pure parts (bench/requestcounts.py, bench/quiet_runs.py,
bench/quiet_parking.py, bench/quiet_reporting.py): reading the API server's request counters, turning
them into rates, planning the freed room, and summarising a run."""

from __future__ import annotations

import math
from typing import Any

import pytest
from bench.pods import PodTimes
from bench.quiet_parking import taint_patch
from bench.quiet_reporting import markdown, ratios, targets
from bench.quiet_runs import OWN_WRITES, Room, Run, Sample, plan_room, summarise
from bench.requestcounts import (
    BINDING,
    RequestKey,
    by_label,
    difference,
    event_occurrences,
    mean_ms,
    net_of_baseline,
    parse_reading,
    parse_request_totals,
    per_minute,
    rate_series,
    regarded,
    scheduling_total,
    writes,
)
from bench.variants import Variant


def _total(verb: str, group: str, resource: str, subresource: str, code: str, value: str) -> str:
    labels = (
        f'code="{code}",component="apiserver",dry_run="",group="{group}",resource="{resource}",'
        f'scope="resource",subresource="{subresource}",verb="{verb}",version="v1"'
    )
    return f"apiserver_request_total{{{labels}}} {value}"


METRICS = "\n".join(
    [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, ...",
        "# TYPE apiserver_request_total counter",
        _total("POST", "", "pods", "binding", "201", "40"),
        _total("POST", "", "pods", "binding", "409", "2"),
        _total("PATCH", "", "pods", "status", "200", "7"),
        _total("POST", "events.k8s.io", "events", "", "201", "5"),
        _total("LIST", "", "pods", "", "200", "3"),
        _total("PUT", "coordination.k8s.io", "leases", "", "200", "1.5e+03"),
        'apiserver_request_total_other{verb="POST"} 99',
        'apiserver_request_duration_seconds_bucket{verb="POST",le="0.1"} 12',
    ]
)

CONDITION = RequestKey("PATCH", "", "pods", "status")
EVENT = RequestKey("POST", "events.k8s.io", "events")
LEASE = RequestKey("PUT", "coordination.k8s.io", "leases")
CREATE = RequestKey("POST", "", "pods")


def test_parse_sums_over_codes_and_scopes_and_ignores_other_metrics() -> None:
    counts = parse_request_totals(METRICS)
    assert counts == {
        BINDING: 42.0,
        CONDITION: 7.0,
        EVENT: 5.0,
        RequestKey("LIST", "", "pods"): 3.0,
        LEASE: 1500.0,
    }


def test_parse_reads_escaped_quotes_in_label_values() -> None:
    text = 'apiserver_request_total{resource="we\\"ird",verb="GET",group=""} 4\n'
    assert parse_request_totals(text) == {RequestKey("GET", "", 'we"ird'): 4.0}


def test_by_label_sums_a_metric_by_one_label() -> None:
    text = "\n".join(
        [
            "# TYPE promsched_api_writes_dropped_total counter",
            'promsched_api_writes_dropped_total{kind="event"} 962.0',
            'promsched_api_writes_dropped_total{kind="condition"} 3.0',
            'promsched_api_writes_dropped_created{kind="event"} 1.7e9',
        ]
    )
    assert by_label(text, "promsched_api_writes_dropped_total", "kind") == {"event": 962.0, "condition": 3.0}
    assert by_label(METRICS, "apiserver_request_total", "verb") == {
        "POST": 47.0,
        "PATCH": 7.0,
        "LIST": 3.0,
        "PUT": 1500.0,
    }


def test_labels_name_the_resource_as_kubectl_does() -> None:
    assert BINDING.label == "POST pods/binding"
    assert EVENT.label == "POST events.events.k8s.io"
    assert LEASE.label == "PUT leases.coordination.k8s.io"


def test_writes_are_the_mutating_verbs_and_scheduling_writes_what_a_pending_pod_costs() -> None:
    counts = parse_request_totals(METRICS)
    assert set(writes(counts)) == {BINDING, CONDITION, EVENT, LEASE}
    assert scheduling_total(counts) == 42 + 7 + 5  # not the lease, not the LIST
    assert not CREATE.is_scheduling
    assert RequestKey("PATCH", "", "events").is_scheduling


def test_difference_keeps_what_grew_including_new_keys() -> None:
    before = {BINDING: 10.0, CONDITION: 4.0}
    after = {BINDING: 25.0, CONDITION: 4.0, EVENT: 3.0}
    assert difference(before, after) == {BINDING: 15.0, EVENT: 3.0}


def test_per_minute_and_net_of_baseline() -> None:
    rates = per_minute({BINDING: 30.0, LEASE: 90.0, CREATE: 300.0}, 30.0)
    assert rates == {BINDING: 60.0, LEASE: 180.0, CREATE: 600.0}
    assert per_minute({BINDING: 1.0}, 0.0) == {}
    # The lease's baseline is subtracted, the benchmark's own creates are left out, and a key below
    # its baseline counts nothing rather than less than nothing.
    baseline = {LEASE: 150.0, CONDITION: 20.0}
    assert net_of_baseline({**rates, CONDITION: 5.0}, baseline, excluded=[CREATE]) == 60.0 + 30.0


def test_rate_series_is_per_minute_between_readings() -> None:
    series = rate_series([(0.0, 100.0), (30.0, 130.0), (60.0, 130.0), (60.0, 140.0)])
    assert series == [(15.0, 60.0), (45.0, 0.0)]  # a reading at the same time has no rate


def test_event_occurrences_count_series_and_counts() -> None:
    events: list[dict[str, Any]] = [
        {"series": {"count": 4}, "count": 4},
        {"count": 3},
        {},
        {"series": None, "count": 0},
    ]
    assert event_occurrences(events) == 4 + 3 + 1 + 1


def test_regarded_names_the_objects_of_one_reason() -> None:
    events: list[dict[str, Any]] = [
        {"reason": "FailedScheduling", "involvedObject": {"kind": "Pod", "name": "a"}},
        {"reason": "FailedScheduling", "involvedObject": {"kind": "Pod", "name": "a"}},
        {"reason": "FailedScheduling", "involvedObject": {"kind": "Pod", "name": "b"}},
        {"reason": "Scheduled", "involvedObject": {"kind": "Pod", "name": "c"}},
    ]
    assert regarded(events, "FailedScheduling") == {"a", "b"}
    assert regarded(events, "Preempted") == set()


def test_plan_room_fills_the_freed_nodes_exactly() -> None:
    names = [f"node-{i}" for i in range(100)]
    room = plan_room(2000, names, 3900)
    assert (len(room.nodes), room.per_node, room.cpu_milli, room.capacity) == (50, 20, 195, 1000)
    assert room.per_node * room.cpu_milli <= 3900 < (room.per_node + 1) * room.cpu_milli
    small = plan_room(300, names, 3900)
    assert (len(small.nodes), small.per_node, small.capacity) == (50, 3, 150)
    few = plan_room(20, names, 3900)
    assert (len(few.nodes), few.per_node) == (10, 1)
    assert few.nodes == tuple(names[:10])


def test_plan_room_names_the_fix_when_the_nodes_cannot_hold_half() -> None:
    with pytest.raises(ValueError, match="raise --nodes"):
        plan_room(20000, [f"node-{i}" for i in range(10)], 3900)
    with pytest.raises(ValueError, match="--pods must be at least 2"):
        plan_room(1, ["a", "b"], 3900)


def test_taint_patch_sets_or_clears_the_park_taint() -> None:
    parked = taint_patch("node-3", parked=True)
    assert (parked.method, parked.path) == ("PATCH", "/api/v1/nodes/node-3")
    assert parked.body["spec"]["taints"][0]["key"] == "promsched.io/bench-parked"
    assert taint_patch("node-3", parked=False).body == {"spec": {"taints": []}}


def _run(label: str, key: str, condition_patches: float, bind_delays: list[float]) -> Run:
    """A run of 4 pods parked 60 s from t=100, with `condition_patches` written while parked, then freed
    at t=200 and bound `bind_delays` seconds later."""
    variant = Variant(key, label, "promsched")
    run = Run(variant, Room(("node-0",), 2, 1950), pods=4, times=PodTimes())
    base = {CREATE: 0.0, CONDITION: 0.0, LEASE: 0.0}
    run.samples = [
        Sample(100.0, "start", base),
        Sample(110.0, "created", {**base, CREATE: 4.0}),
        Sample(
            140.0, "parked", {**base, CREATE: 4.0, CONDITION: condition_patches / 2, LEASE: 10.0}, 4.0, 20.0
        ),
        Sample(
            170.0, "park-end", {**base, CREATE: 4.0, CONDITION: condition_patches, LEASE: 20.0}, 7.0, 35.0
        ),
        Sample(
            200.0 + max(bind_delays),
            "bound",
            {**base, CREATE: 4.0, CONDITION: condition_patches, LEASE: 20.0, BINDING: 2.0},
        ),
        Sample(
            230.0 + max(bind_delays),
            "end",
            {**base, CREATE: 4.0, CONDITION: condition_patches, LEASE: 20.0, BINDING: 2.0, EVENT: 2.0},
        ),
    ]
    run.created_at, run.freed_at = 110.0, 200.0
    run.times.bound = {f"pod-{i}": 200.0 + delay for i, delay in enumerate(bind_delays)}
    run.events_parked = [
        {"count": 3, "reason": "FailedScheduling", "involvedObject": {"name": "pod-0"}},
        {"series": {"count": 2}, "reason": "FailedScheduling", "involvedObject": {"name": "pod-1"}},
    ]
    run.events_end = [*run.events_parked, {}]
    return run


def test_summarise_a_run() -> None:
    result = summarise(_run("promsched", "promsched", 35.0, [1.0, 3.0]), {LEASE: 10.0})
    park, freed = result["park"], result["freed"]
    assert result["park_s"] == 70.0
    assert park["scheduling_writes"] == 35.0
    assert park["scheduling_writes_per_minute"] == pytest.approx(30.0)
    # Writes per minute above the baseline: conditions 30 and leases 20 in 70 s less 10 a minute; the
    # creates are the bench's own.
    assert CREATE in OWN_WRITES
    assert park["net_writes_per_minute"] == pytest.approx(30.0 + 20 * 60 / 70 - 10.0)
    assert park["writes_per_minute"]["PATCH pods/status"] == pytest.approx(30.0)
    # The second half of the park starts at the first reading past its middle (140).
    assert park["steady_s"] == 30.0
    assert park["steady_scheduling_writes_per_minute"] == pytest.approx(35.0)
    assert result["events"] == {
        "objects_parked": 2,
        "pods_without_failed_scheduling_parked": 2,  # of 4
        "occurrences_parked": 5,
        "objects_end": 3,
        "occurrences_end": 6,
    }
    assert (freed["bound"], freed["first_s"], freed["median_s"], freed["max_s"]) == (2, 1.0, 2.0, 3.0)
    assert freed["binds_per_second"] == pytest.approx(0.5)  # 1 more binding over 2 s
    assert freed["scheduling_writes"] == 2.0
    assert result["bound_while_parked"] == 0
    assert result["writes_dropped_parked"] is None  # not read: no /metrics of the scheduler
    assert result["free_at_s"] == 100.0
    assert result["settle"]["scheduling_writes"] == 2.0
    # CPU as a share of one core: 7 s in the 70 s park, 3 s in its second half (30 s).
    assert park["scheduler_cpu_percent"] == pytest.approx(10.0)
    assert park["steady_scheduler_cpu_percent"] == pytest.approx(10.0)
    assert park["apiserver_cpu_percent"] == pytest.approx(50.0)
    assert result["series"][-1] == [133.0, 39.0]


def test_summarise_reports_the_writes_promsched_dropped() -> None:
    run = _run("promsched", "promsched", 35.0, [1.0])
    run.scheduler_metrics_url = "http://127.0.0.1:1"
    run.dropped_parked, run.dropped_end = {"event": 962.0}, {"event": 962.0, "condition": 1.0}
    result = summarise(run, {})
    assert (result["writes_dropped_parked"], result["writes_dropped_end"]) == (962.0, 963.0)
    assert result["writes_dropped_by_kind"] == {"event": 962.0, "condition": 1.0}


def test_summarise_without_bindings_reports_no_times() -> None:
    run = _run("promsched", "promsched", 0.0, [5.0])
    run.times.bound = {}
    freed = summarise(run, {})["freed"]
    assert freed["bound"] == 0
    assert math.isnan(freed["median_s"])
    assert math.isnan(freed["binds_per_second"])


def _results(promsched: Run, kube: Run) -> dict[str, object]:
    return {
        "command": "python -m bench.quiet --pods 4",
        "started": "2026-01-01T00:00:00+0000",
        "wall_s": 600.0,
        "kubernetes": "v1.37.2",
        "machine": {"cpus": 2, "cpu_model": "test"},
        "revision": {"commit": "0" * 40, "changed": []},
        "settings": {
            "nodes": 2,
            "pods": 4,
            "park_minutes": 1.0,
            "taint": {"key": "promsched.io/bench-parked"},
        },
        "room": {"nodes": 1, "per_node": 2, "cpu_milli": 1950, "capacity": 2},
        "baseline": {"seconds": 60.0, "writes_per_minute": {"PUT leases.coordination.k8s.io": 10.0}},
        "runs": [summarise(promsched, {}), summarise(kube, {})],
    }


def test_ratios_and_targets_compare_promsched_with_kube_scheduler() -> None:
    results = _results(
        _run("promsched", "promsched", 35.0, [1.0, 14.0]),
        _run("kube-scheduler (QPS 50/100)", "ks-default", 70.0, [1.0, 3.0]),
    )
    found = ratios(results)
    parked = "scheduling writes/min while parked (pods/status, pods/binding, events)"
    assert found[parked] == pytest.approx(0.5)
    goals = targets(results)
    assert goals["scheduling writes/min while parked <= kube-scheduler's"] is True
    assert goals["median time to bind within 10 s of kube-scheduler's"] is True  # 7.5 vs 2.0
    assert goals["max time to bind within 10 s of kube-scheduler's"] is False  # 14 vs 3
    assert goals["all freed pods bound (both)"] is True
    text = markdown(results)
    assert f"| {parked} | 30 | 60 | 0.50 |" in text
    assert "**The park was 1 minutes, shorter than the issue's 10.**" in text
    assert "- max time to bind within 10 s of kube-scheduler's: **no**" in text
    assert "| PATCH pods/status | 30.0 | 60.0 | 0.0 |" in text


def test_reading_gives_each_request_kinds_count_and_serving_seconds() -> None:
    seconds = (
        'apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",'
        'scope="resource",subresource="binding",verb="POST",version="v1"} 0.9'
    )
    reading = parse_reading(METRICS + "\n" + seconds)
    assert reading.totals == parse_request_totals(METRICS)
    assert reading.seconds == {BINDING: 0.9}
    assert mean_ms(reading.seconds, reading.totals, BINDING) == pytest.approx(1000 * 0.9 / 42)
    assert math.isnan(mean_ms(reading.seconds, reading.totals, RequestKey("DELETE", "", "pods")))
