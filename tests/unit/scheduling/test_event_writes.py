"""What the reporter writes of a pod's event series: each series' final count before it ends, whatever ends
it, and a series patch only after its Event exists (created again if gone), as client-go's recorder."""

from __future__ import annotations

import asyncio
from typing import Any

from promsched.kube.requests import Request
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.reporting.reporting_pods import PodReporter
from support.background import Background
from support.clocks import Clock
from support.fake_apis import FakeSender
from support.objects import pod_object

MESSAGE = "0/3 nodes are available: 3 Insufficient cpu."


class Harness:
    """A reporter whose writes run in `background`, which the test settles, its recorder on `clock`."""

    def __init__(self, sender: FakeSender | None = None) -> None:
        self.sender = sender or FakeSender()
        self.background = Background()
        self.pod = PodInfo.from_object(pod_object("huge", cpu="64"))
        self.reporter = PodReporter(self.sender, {self.pod.uid: self.pod}, spawn=self.background)
        self.clock = Clock(1_700_000_000.0)
        self.reporter.events.clock = self.clock

    async def fail(self, times: int) -> None:
        """`times` failures of the pod a minute apart, each one's writes sent before the next."""
        for _ in range(times):
            self.reporter.report_unschedulable(self.pod, MESSAGE, "promsched")
            await self.background.settle()
            self.clock.advance(60)

    def event_writes(self) -> list[tuple[str, str, Any]]:
        """(verb, Event name, series count or None) of each event request sent, in order."""
        writes = []
        for request in self.sender.sent:
            if "/events" not in request.path:
                continue
            if request.method == "POST":
                writes.append(("POST", request.body["metadata"]["name"], request.body.get("series")))
            else:
                writes.append(("PATCH", request.path.rsplit("/", 1)[-1], request.body["series"]))
        return [(verb, name, series and series["count"]) for verb, name, series in writes]


async def test_a_series_idle_past_six_minutes_writes_its_final_count_before_the_next_event() -> None:
    harness = Harness()
    await harness.fail(5)
    harness.clock.advance(6 * 60)
    await harness.fail(1)
    (_, first, _), *_, (_, second, _) = harness.event_writes()
    assert first != second
    assert harness.event_writes() == [
        ("POST", first, None),
        ("PATCH", first, 2),
        ("PATCH", first, 5),  # the final count, before the new Event
        ("POST", second, None),
    ]


async def test_the_six_minute_sweep_writes_the_final_count_of_an_idle_series() -> None:
    harness = Harness()
    await harness.fail(4)
    harness.reporter.finish_events()
    await harness.background.settle()
    assert [write[2] for write in harness.event_writes()] == [None, 2]  # not idle long enough yet
    harness.clock.advance(6 * 60)
    harness.reporter.finish_events()
    await harness.background.settle()
    assert [write[2] for write in harness.event_writes()] == [None, 2, 4]
    harness.reporter.finish_events()
    await harness.background.settle()
    assert len(harness.event_writes()) == 3  # finished: written once


async def test_a_pod_that_is_bound_or_gone_has_its_series_final_count_written() -> None:
    harness = Harness()
    await harness.fail(3)
    harness.reporter.forget(harness.pod.uid)
    await harness.background.settle()
    assert [write[2] for write in harness.event_writes()] == [None, 2, 3]


async def test_shutdown_writes_the_counts_the_api_server_lacks() -> None:
    harness = Harness()
    await harness.fail(3)
    await harness.reporter.close()
    assert [write[2] for write in harness.event_writes()] == [None, 2, 3]


class HeldCreates(FakeSender):
    """Holds each Event's create until `gate` opens."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def send(self, request: Request) -> Any:
        if request.method == "POST":
            await self.gate.wait()
        return await super().send(request)


async def test_a_series_patch_waits_for_its_events_create_and_one_still_waiting_joins_it() -> None:
    sender = HeldCreates()
    harness = Harness(sender)
    reporter = harness.reporter
    reporter.report_unschedulable(harness.pod, MESSAGE, "promsched")
    reporter.report_unschedulable(harness.pod, MESSAGE, "promsched")
    # Not sent yet: the count goes out in the create.
    await asyncio.sleep(0)
    reporter.report_unschedulable(harness.pod, MESSAGE, "promsched")
    harness.clock.advance(30 * 60)
    reporter.refresh_events()  # the create is on its way now: this patch waits for it
    for _ in range(10):
        await asyncio.sleep(0)
    assert [request.method for request in sender.sent if "/events" in request.path] == []
    sender.gate.set()
    await harness.background.settle()
    name = harness.event_writes()[0][1]
    assert harness.event_writes() == [("POST", name, 2), ("PATCH", name, 3)]


async def test_a_series_patch_that_finds_its_event_gone_creates_it_with_the_count() -> None:
    harness = Harness()
    await harness.fail(3)
    [(_, name, _), *_] = harness.event_writes()
    harness.sender.fail[f"/events/{name}"] = 404  # deleted, or past the event TTL
    harness.reporter.refresh_events()
    await harness.background.settle()
    assert harness.event_writes() == [
        ("POST", name, None),
        ("PATCH", name, 2),
        ("PATCH", name, 3),
        ("POST", name, 3),
    ]
    [recreated] = [request for request in harness.sender.sent if request.method == "POST"][1:]
    assert recreated.body["reason"] == "FailedScheduling"
    assert recreated.body["note"] == MESSAGE
