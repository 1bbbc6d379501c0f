"""Informational writes queue behind bindings: bounded, coalesced per object, drops counted."""

from __future__ import annotations

import asyncio

import pytest

from promsched.kube.requests import Request
from promsched.kube.sending import ApiError
from promsched.scheduling import telemetry
from promsched.scheduling.writing import WriteQueue


def condition(pod: str, message: str) -> Request:
    return Request("PATCH", f"/api/v1/namespaces/ns/pods/{pod}/status", {"message": message})


def dropped(kind: str) -> float:
    return telemetry.api_writes_dropped.labels(kind)._value.get()


async def test_a_newer_write_for_the_same_object_replaces_the_pending_one_in_its_place() -> None:
    queue = WriteQueue()
    queue.submit("condition", "ns/a", condition("a", "first"))
    queue.submit("condition", "ns/b", condition("b", "only"))
    queue.submit("condition", "ns/a", condition("a", "second"))
    assert len(queue) == 2
    assert queue.coalesced == 1
    assert (await queue.next()).body == {"message": "second"}
    assert (await queue.next()).body == {"message": "only"}


async def test_a_full_queue_drops_new_writes_and_counts_them_by_kind() -> None:
    queue = WriteQueue(limit=2)
    before = dropped("event")
    assert queue.submit("event", "e1", condition("a", "1"))
    assert queue.submit("condition", "ns/a", condition("a", "2"))
    assert not queue.submit("event", "e2", condition("a", "3"))
    assert queue.submit("condition", "ns/a", condition("a", "4"))  # coalescing needs no room
    assert queue.dropped == {"event": 1}
    assert dropped("event") == before + 1


async def test_workers_send_everything_and_a_failed_write_does_not_stop_them() -> None:
    queue = WriteQueue()
    sent: list[str] = []
    done = asyncio.Event()

    async def send(request: Request) -> None:
        sent.append(request.body["message"])
        if len(sent) == 3:
            done.set()
        if request.body["message"] == "boom":
            raise ApiError(request, 500, "InternalError", "boom")

    for index, message in enumerate(["boom", "two", "three"]):
        queue.submit("condition", f"ns/{index}", condition(str(index), message))
    runner = asyncio.create_task(queue.run(send, workers=2))
    try:
        await asyncio.wait_for(done.wait(), timeout=10)
    finally:
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
    assert sorted(sent) == ["boom", "three", "two"]
