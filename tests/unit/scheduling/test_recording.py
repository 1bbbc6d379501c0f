"""A policy's status counts pods, not attempts, and a stuck pod does not hide the placements."""

from __future__ import annotations

from promsched.api.statuses import Decision
from promsched.scheduling.policies.recording import LazyDecision, PolicyStatus

BASE = {"time": "2026-11-29T00:00:00Z", "latencyMs": 1, "generation": 1, "mode": "Enforce"}


def decision(pod: str, node: str | None = None) -> Decision:
    return Decision.model_validate({**BASE, "pod": pod, "node": node})


def test_a_pod_retried_with_the_same_failure_is_counted_once_and_shown_once() -> None:
    status = PolicyStatus(history=3)
    for index in range(3):
        status.record_scheduled(f"uid-{index}", decision(f"ns/placed-{index}", "n1"))
    for _ in range(100):
        status.record_unschedulable(
            "uid-stuck", "0/6 nodes are available: 6 Insufficient cpu.", decision("ns/stuck")
        )
    body = status.to_status()
    assert (body["scheduled"], body["unschedulable"], body["unschedulableNow"]) == (3, 1, 1)
    assert [d["pod"] for d in body["recentDecisions"]] == ["ns/stuck", "ns/placed-2", "ns/placed-1"]


def test_a_changed_failure_message_is_shown_again_but_not_counted_again() -> None:
    status = PolicyStatus(history=5)
    status.record_unschedulable("uid-a", "6 Insufficient cpu", decision("ns/a"))
    status.dirty = False
    status.record_unschedulable("uid-a", "6 Insufficient cpu", decision("ns/a"))
    assert not status.dirty  # nothing to write
    status.record_unschedulable("uid-a", "6 Insufficient memory", decision("ns/a"))
    assert status.dirty
    assert status.unschedulable == 1
    assert len(status.decisions) == 2


def test_unschedulable_now_falls_when_a_failing_pod_is_placed_or_gone() -> None:
    status = PolicyStatus(history=5)
    status.record_unschedulable("uid-a", "no fit", None)
    status.record_unschedulable("uid-b", "no fit", None)
    status.record_scheduled("uid-a", decision("ns/a", "n1"))
    assert status.to_status()["unschedulableNow"] == 1
    status.dirty = False
    status.forget("uid-b")
    assert status.dirty
    body = status.to_status()
    assert (body["unschedulable"], body["unschedulableNow"]) == (2, 0)


def test_a_lazy_decision_is_built_once_and_only_when_the_status_shows_it() -> None:
    status = PolicyStatus(history=2)
    built: list[str] = []

    def lazy(pod: str) -> LazyDecision:
        def build() -> Decision:
            built.append(pod)
            return decision(pod, "n1")

        return LazyDecision(build)

    for index in range(10):
        status.record_scheduled(f"uid-{index}", lazy(f"ns/p-{index}"))
    assert built == []
    body = status.to_status()
    assert [d["pod"] for d in body["recentDecisions"]] == ["ns/p-9", "ns/p-8"]
    assert body["lastDecision"]["pod"] == "ns/p-9"
    status.to_status()
    assert sorted(built) == ["ns/p-8", "ns/p-9"]
