"""When a benchmark run ends (bench/running.py): once its pods are Running and the scheduler's events are
written, not at the last binding, so the pods' status updates and the events written behind the bindings
count in every variant's CPU alike."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.pods import PodTimes, catch_up
from bench.requestcounts import BINDING, Reading, RequestKey
from bench.running import (
    EVENTS_SETTLE_LIMIT,
    EVENTS_STILL_SECONDS,
    WATCH_SILENT_SECONDS,
    events_settled,
    until_set,
)
from tests.support.objects import pod_object

EVENTS = RequestKey("POST", "events.k8s.io", "events")


class FakeServer:
    """Readings whose event count follows `events_at` (seconds -> count); time moves only by sleeping."""

    def __init__(self, events_at: dict[float, float]) -> None:
        self.events_at = events_at
        self.now = 0.0
        self.reads = 0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds

    async def read(self) -> Reading:
        self.reads += 1
        count = max(value for at, value in self.events_at.items() if at <= self.now)
        return Reading({EVENTS: count, BINDING: 10.0}, {})


def settle(server: FakeServer, since_events: float, bound: int) -> Reading:
    since = Reading({EVENTS: since_events}, {})
    return asyncio.run(events_settled(server.read, since, bound, clock=server.clock, sleep=server.sleep))


def test_a_run_waits_for_an_event_per_bound_pod_written_behind_the_bindings() -> None:
    # 10 pods bound at t=0 with 2 of their events written; the rest trickle in until t=3.
    server = FakeServer({0.0: 7.0, 1.0: 9.0, 2.0: 12.0, 3.0: 15.0})
    reading = settle(server, since_events=5.0, bound=10)
    assert reading.totals[EVENTS] == 15.0
    assert server.now == 3.0


def test_a_run_of_a_scheduler_writing_fewer_events_ends_once_none_came_for_a_while() -> None:
    server = FakeServer({0.0: 5.0, 0.5: 6.0})
    reading = settle(server, since_events=5.0, bound=10)
    assert reading.totals[EVENTS] == 6.0
    assert server.now == 0.5 + EVENTS_STILL_SECONDS


def test_a_run_whose_events_never_stop_ends_at_the_limit() -> None:
    server = FakeServer({at / 4: at for at in range(4 * int(EVENTS_SETTLE_LIMIT) + 8)})
    settle(server, since_events=0.0, bound=10**6)
    assert EVENTS_SETTLE_LIMIT <= server.now < EVENTS_SETTLE_LIMIT + 1


def test_a_run_whose_events_are_all_written_ends_at_once() -> None:
    server = FakeServer({0.0: 20.0})
    settle(server, since_events=10.0, bound=10)
    assert (server.now, server.reads) == (0.0, 1)


class Listing:
    """A client whose every GET of the namespace's pods answers `pods`."""

    def __init__(self, *pods: dict[str, Any]) -> None:
        self.pods = list(pods)

    async def send(self, request: Any) -> dict[str, Any]:
        return {"items": self.pods, "metadata": {"resourceVersion": "9"}}


def test_the_bench_records_a_pod_bound_and_then_running() -> None:
    times, progress = PodTimes(), []
    bound = pod_object("a", nodeName="n1")  # bound, kwok has not started it yet
    running = pod_object("a", node_name="n1")
    for state in (bound, running, running):
        asyncio.run(catch_up(Listing(state), "ns", times, lambda: progress.append(len(times.running))))
    assert list(times.bound) == ["a"]
    assert times.node == {"a": "n1"}
    assert list(times.running) == ["a"]
    assert times.running["a"] >= times.bound["a"]
    assert progress == [0, 1]  # once for the binding, once for Running; a repeat changes nothing


class CatchUps:
    def __init__(self) -> None:
        self.count = 0

    async def __call__(self) -> None:
        self.count += 1


def test_waiting_for_the_watch_ends_when_it_says_so() -> None:
    catch_ups = CatchUps()

    async def scenario() -> None:
        flag = asyncio.Event()
        asyncio.get_running_loop().call_soon(flag.set)
        await until_set(flag, 30.0, PodTimes(last_event=time.monotonic()), catch_ups)

    asyncio.run(asyncio.wait_for(scenario(), WATCH_SILENT_SECONDS))
    assert catch_ups.count == 0


def test_waiting_for_a_silent_watch_lists_the_pods_until_the_deadline() -> None:
    catch_ups = CatchUps()
    times = PodTimes(last_event=time.monotonic() - 2 * WATCH_SILENT_SECONDS)
    asyncio.run(until_set(asyncio.Event(), 0.05, times, catch_ups))
    assert catch_ups.count == 1
