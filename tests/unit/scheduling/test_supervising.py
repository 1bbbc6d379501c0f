"""Long-lived tasks run under one supervisor: a failure is logged, counted and restarted after a capped,
doubling pause; repeated failures are reported for /healthz; cancelling stops a task for good. The
supervisor's clock and sleep are the test's: nothing waits for real."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from promsched.scheduling import telemetry
from promsched.scheduling.schedulers import Scheduler
from promsched.scheduling.supervising import (
    FAILURES_LIMIT,
    FAILURES_WINDOW_SECONDS,
    RESTART_PAUSE_CAP_SECONDS,
    Supervisor,
)
from support.clocks import Clock
from support.fake_apis import FakeSender
from support.polling import eventually_async


class Timeline:
    """A clock and a sleep that moves it at once, recording each pause."""

    def __init__(self) -> None:
        self.clock = Clock(1000.0)
        self.pauses: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.clock.advance(seconds)
        await asyncio.sleep(0)

    def supervisor(self) -> Supervisor:
        return Supervisor(clock=self.clock, sleep=self.sleep)


def restarts(task: str) -> float:
    return telemetry.task_restarts.labels(task)._value.get()


class Flaky:
    """Work that fails `failures` times (each run lasting `lasting` seconds), then waits until cancelled."""

    def __init__(self, timeline: Timeline, failures: int, lasting: float = 0.0) -> None:
        self.timeline = timeline
        self.failures = failures
        self.lasting = lasting
        self.runs = 0
        self.cancelled = asyncio.Event()

    async def __call__(self) -> None:
        self.runs += 1
        self.timeline.clock.advance(self.lasting)
        if self.runs <= self.failures:
            raise RuntimeError(f"bug number {self.runs}")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def test_a_failed_task_is_logged_counted_and_restarted_after_a_doubling_capped_pause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    timeline = Timeline()
    supervisor = timeline.supervisor()
    work = Flaky(timeline, failures=9)
    before = restarts("flaky")
    with caplog.at_level(logging.ERROR, logger="promsched.scheduling.supervising"):
        task = supervisor.start("flaky", work)
        await eventually_async(lambda: work.runs == 10, what="nine restarts")
    assert timeline.pauses == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    assert restarts("flaky") == before + 9
    assert caplog.records[0].getMessage() == "Background task flaky failed; restarting it in 1s"
    assert caplog.records[0].exc_info is not None
    assert "bug number 1" in caplog.text  # the traceback
    assert not task.done()
    await supervisor.close()
    assert task.cancelled()
    assert work.cancelled.is_set()
    assert work.runs == 10  # a cancelled task is not restarted


async def test_a_task_that_had_been_working_starts_its_pauses_over() -> None:
    timeline = Timeline()
    supervisor = timeline.supervisor()
    work = Flaky(timeline, failures=3, lasting=RESTART_PAUSE_CAP_SECONDS + 1)
    supervisor.start("steady", work)
    await eventually_async(lambda: work.runs == 4, what="three restarts")
    assert timeline.pauses == [1.0, 1.0, 1.0]
    await supervisor.close()


async def test_repeated_failures_within_the_window_are_reported_and_rare_ones_are_not() -> None:
    timeline = Timeline()
    supervisor = timeline.supervisor()
    rare = Flaky(timeline, failures=FAILURES_LIMIT, lasting=FAILURES_WINDOW_SECONDS / 4)
    supervisor.start("rare", rare)
    await eventually_async(lambda: rare.runs == FAILURES_LIMIT + 1, what="the rare task's restarts")
    assert supervisor.failing() == []
    almost = Flaky(timeline, failures=FAILURES_LIMIT - 1)
    supervisor.start("almost", almost)
    await eventually_async(lambda: almost.runs == FAILURES_LIMIT, what="the restarts short of the limit")
    assert supervisor.failing() == []
    frequent = Flaky(timeline, failures=FAILURES_LIMIT)
    supervisor.start("frequent", frequent)
    await eventually_async(lambda: frequent.runs == FAILURES_LIMIT + 1, what="restarts up to the limit")
    assert supervisor.failing() == ["frequent"]
    timeline.clock.advance(FAILURES_WINDOW_SECONDS)
    assert supervisor.failing() == []  # it has been working since: the kubelet need not restart the pod
    await supervisor.close()


async def test_a_task_that_returns_is_done_and_not_restarted() -> None:
    timeline = Timeline()
    supervisor = timeline.supervisor()
    runs: list[int] = []

    async def once() -> None:
        runs.append(1)

    task = supervisor.start("once", once)
    await task
    assert runs == [1]
    assert timeline.pauses == []


async def test_the_schedulers_background_tasks_are_restarted_after_an_unexpected_error() -> None:
    timeline = Timeline()
    scheduler = Scheduler(FakeSender(), rng=random.Random(7), supervisor=timeline.supervisor())
    rebalancer = Flaky(timeline, failures=1)
    scheduler.rebalancer.run = rebalancer  # type: ignore[method-assign]
    before = restarts("rebalancer")
    loop = asyncio.create_task(scheduler.run())
    try:
        await eventually_async(lambda: rebalancer.runs == 2, what="the rebalancer restarted")
        assert restarts("rebalancer") == before + 1
        assert not loop.done()
    finally:
        loop.cancel()
        await asyncio.wait([loop])
        await scheduler.close()
    assert rebalancer.cancelled.is_set()
