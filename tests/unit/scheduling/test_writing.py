"""Informational writes queue behind bindings: bounded, coalesced per object, drops counted."""

from __future__ import annotations

import asyncio

from promsched.kube.requests import Request
from promsched.kube.sending import ApiError
from promsched.scheduling import telemetry
from promsched.scheduling.reporting.writing import WriteQueue
from support.background import Background


def condition(pod: str, message: str) -> Request:
    return Request("PATCH", f"/api/v1/namespaces/ns/pods/{pod}/status", {"message": message})


def dropped(kind: str) -> float:
    return telemetry.api_writes_dropped.labels(kind)._value.get()


class Writes:
    """A WriteQueue whose workers run in `background`, which the test can settle."""

    def __init__(self, fail: str = "", **options: int) -> None:
        self.sent: list[str] = []
        self.background = Background()
        self.fail = fail
        self.queue = WriteQueue(self.send, self.background, **options)

    async def send(self, request: Request) -> None:
        await asyncio.sleep(0)
        self.sent.append(request.body["message"])
        if request.body["message"] == self.fail:
            raise ApiError(request, 500, "InternalError", "boom")


async def test_a_newer_write_for_the_same_object_replaces_the_pending_one_in_its_place() -> None:
    writes = Writes(workers=1)
    queue = writes.queue
    queue.submit("condition", "ns/a", condition("a", "first"))
    queue.submit("condition", "ns/b", condition("b", "only"))
    queue.submit("condition", "ns/a", condition("a", "second"))
    assert len(queue) == 2
    assert queue.coalesced == 1
    await writes.background.settle()
    assert writes.sent == ["second", "only"]
    assert queue.active == 0  # the worker ended with the work


async def test_a_full_queue_drops_new_writes_and_counts_them_by_kind() -> None:
    writes = Writes(limit=2, workers=1)
    queue = writes.queue
    before = dropped("event")
    assert queue.submit("event", "e1", condition("a", "1"))
    assert queue.submit("condition", "ns/a", condition("a", "2"))
    assert not queue.submit("event", "e2", condition("a", "3"))
    assert queue.submit("condition", "ns/a", condition("a", "4"))  # coalescing needs no room
    assert queue.dropped == {"event": 1}
    assert dropped("event") == before + 1
    await writes.background.settle()


async def test_at_most_the_workers_send_at_once_and_a_failed_write_does_not_stop_them() -> None:
    writes = Writes(fail="boom", workers=2)
    for index, message in enumerate(["boom", "two", "three", "four"]):
        writes.queue.submit("condition", f"ns/{index}", condition(str(index), message))
    assert len(writes.background.tasks) == 2
    await writes.background.settle()
    assert sorted(writes.sent) == ["boom", "four", "three", "two"]


async def test_a_write_for_an_object_waits_for_the_one_on_its_way_and_others_pass_it() -> None:
    gate = asyncio.Event()
    started: list[str] = []

    async def send(request: Request) -> None:
        started.append(request.body["message"])
        if request.body["message"] == "create":
            await gate.wait()

    queue = WriteQueue(send, asyncio.ensure_future, workers=4)
    queue.submit("event", "e1", condition("a", "create"))
    await asyncio.sleep(0)  # a worker takes it, and waits on the API server
    queue.submit("event", "e1", condition("a", "series"))
    queue.submit("condition", "ns/b", condition("b", "other"))
    for _ in range(10):
        await asyncio.sleep(0)
    assert started == ["create", "other"]
    drained = asyncio.ensure_future(queue.drain())
    gate.set()
    await drained
    assert started == ["create", "other", "series"]
    assert (len(queue), queue.active) == (0, 0)
