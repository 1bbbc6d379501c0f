"""When a benchmark run ends (bench/running.py): once the scheduler's events are written, not at the
last binding, so events written behind the bindings count in its CPU."""

from __future__ import annotations

import asyncio

from bench.requestcounts import BINDING, Reading, RequestKey
from bench.running import EVENTS_SETTLE_LIMIT, EVENTS_STILL_SECONDS, events_settled

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
