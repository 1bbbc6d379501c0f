"""Events are written as kube-scheduler's recorder writes them: one object per pod and reason, a series."""

from __future__ import annotations

from promsched.kube.requests import Request
from promsched.scheduling.reporting.eventing import EventRecorder, PodRef
from support.clocks import Clock

POD = PodRef("team", "web-1", "uid-1")
MESSAGE = "0/6 nodes are available: 6 Insufficient cpu."
NOW = 1_700_000_000.0


def recorder(clock: Clock) -> EventRecorder:
    return EventRecorder("promsched", instance="promsched-7d9f-x2x", clock=clock)


def failed(events: EventRecorder, note: str = MESSAGE) -> Request | None:
    return events.record(POD, "Warning", "FailedScheduling", "Scheduling", note)


def name_of(request: Request | None) -> str:
    assert request is not None
    return str(request.body["metadata"]["name"])


def test_the_first_failure_creates_an_events_k8s_io_event_as_kube_scheduler_does() -> None:
    events = recorder(Clock(NOW))
    request = events.record(POD, "Warning", "FailedScheduling", "Scheduling", MESSAGE, "gpu-scheduler")
    assert request is not None
    assert (request.method, request.path) == ("POST", "/apis/events.k8s.io/v1/namespaces/team/events")
    body = request.body
    assert body["apiVersion"] == "events.k8s.io/v1"
    assert body["metadata"]["name"].startswith("web-1.")
    assert body["reportingController"] == "gpu-scheduler"
    assert body["reportingInstance"] == "gpu-scheduler-promsched-7d9f-x2x"
    assert (body["type"], body["reason"], body["action"], body["note"]) == (
        "Warning",
        "FailedScheduling",
        "Scheduling",
        MESSAGE,
    )
    assert body["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "team",
        "name": "web-1",
        "uid": "uid-1",
    }
    assert body["eventTime"].endswith("Z")
    assert "series" not in body


def test_repeats_fold_into_one_series_written_at_the_second_and_at_each_refresh() -> None:
    clock = Clock(NOW)
    events = recorder(clock)
    created = failed(events)
    clock.now += 60
    second = failed(events, "0/6 nodes are available: 5 Insufficient cpu.")
    assert second is not None
    assert second.method == "PATCH"
    assert second.path == f"/apis/events.k8s.io/v1/namespaces/team/events/{name_of(created)}"
    assert second.body["series"]["count"] == 2
    for _ in range(10):
        clock.now += 60
        assert failed(events) is None  # counted, not written
    [refresh] = events.refresh()
    assert refresh.body["series"]["count"] == 12
    assert events.refresh() == []  # nothing new since


def test_a_series_idle_past_six_minutes_is_finished_and_the_next_failure_creates_a_new_event() -> None:
    clock = Clock(NOW)
    events = recorder(clock)
    first = failed(events)
    clock.now += 6 * 60 + 1
    again = failed(events)
    assert again is not None
    assert again.method == "POST"
    assert name_of(again) != name_of(first)


def test_each_reason_has_its_own_event_and_a_pod_opens_only_a_few_new_ones_a_minute() -> None:
    clock = Clock(NOW)
    events = EventRecorder("promsched", instance="i", clock=clock, burst=2, per_pod_interval=60.0)
    created = [events.record(POD, "Warning", f"Reason{index}", "Scheduling", "why") for index in range(4)]
    assert [request is not None for request in created] == [True, True, False, False]
    assert events.limited == 2
    clock.now += 60
    assert events.record(POD, "Warning", "Reason9", "Scheduling", "why") is not None
    other = PodRef("team", "web-2", "uid-2")
    assert events.record(other, "Warning", "Reason0", "Scheduling", "why") is not None


def test_a_deleted_pods_series_is_forgotten() -> None:
    clock = Clock(NOW)
    events = recorder(clock)
    failed(events)
    failed(events)
    failed(events)
    events.forget(POD.uid)
    assert events.refresh() == []
    request = failed(events)
    assert request is not None
    assert request.method == "POST"


def test_long_notes_are_cut_to_the_apis_limit() -> None:
    request = recorder(Clock(NOW)).record(POD, "Warning", "FailedScheduling", "Scheduling", "x" * 5000)
    assert request is not None
    assert len(request.body["note"]) == 1024


def test_an_event_whose_create_was_dropped_is_created_at_the_next_occurrence() -> None:
    events = recorder(Clock(NOW))
    dropped = failed(events)
    events.forget_event(POD.uid, name_of(dropped))
    again = failed(events)
    assert again is not None
    assert again.method == "POST"
