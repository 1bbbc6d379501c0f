"""The scheduling queue: order, backoff, parking of unschedulable pods, one entry per pod."""

from __future__ import annotations

import asyncio

import pytest

from promsched.scheduling.queues import SchedulingQueue, Where, backoff_seconds
from support.clocks import Clock
from support.objects import pod_info


@pytest.fixture
def queue(clock: Clock) -> SchedulingQueue:
    return SchedulingQueue(clock=clock)


def popped(queue: SchedulingQueue) -> list[str]:
    names = []
    while (entry := queue.pop_nowait()) is not None:
        names.append(entry.pod.name)
    return names


def test_higher_priority_first_then_arrival_order(queue: SchedulingQueue) -> None:
    for name, priority in (("a", 0), ("b", 10), ("c", 0), ("d", 10)):
        queue.add_or_update(pod_info(name, priority=priority))
    assert popped(queue) == ["b", "d", "a", "c"]


def test_a_pod_is_queued_once_however_often_it_is_seen(queue: SchedulingQueue) -> None:
    queue.add_or_update(pod_info("a"))
    queue.add_or_update(pod_info("a", resource_version="2"))
    queue.add_or_update(pod_info("a", resource_version="3"))
    assert len(queue) == 1
    assert popped(queue) == ["a"]


def test_backoff_doubles_from_one_to_ten_seconds() -> None:
    assert [backoff_seconds(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]


def test_a_failed_attempt_waits_out_its_backoff(queue: SchedulingQueue, clock: Clock) -> None:
    queue.add_or_update(pod_info("a"))
    entry = queue.pop_nowait()
    assert entry is not None
    queue.backoff("uid-a")
    assert queue.entries["uid-a"].where is Where.BACKOFF
    clock.now += 0.9
    assert queue.pop_nowait() is None
    clock.now += 0.2
    again = queue.pop_nowait()
    assert again is not None
    assert again.attempts == 2


def test_unschedulable_pods_wait_for_a_cluster_change(queue: SchedulingQueue, clock: Clock) -> None:
    queue.add_or_update(pod_info("a"))
    queue.pop_nowait()
    queue.unschedulable("uid-a")
    clock.now += 5
    assert queue.pop_nowait() is None
    # A status-only update (our own PodScheduled condition) is not a reason to try again.
    queue.add_or_update(pod_info("a", resource_version="9"))
    assert queue.pop_nowait() is None
    assert queue.move_all_to_active("node added") == 1
    assert popped(queue) == ["a"]


def test_a_changed_unschedulable_pod_is_retried(queue: SchedulingQueue) -> None:
    queue.add_or_update(pod_info("a"))
    queue.pop_nowait()
    queue.unschedulable("uid-a")
    queue.add_or_update(pod_info("a", node_selector={"disk": "ssd"}))
    assert popped(queue) == ["a"]


def test_an_update_during_the_cycle_retries_instead_of_parking(queue: SchedulingQueue, clock: Clock) -> None:
    queue.add_or_update(pod_info("a"))
    queue.pop_nowait()
    queue.add_or_update(pod_info("a", tolerations=()))  # unchanged: not a reason
    queue.add_or_update(pod_info("a", priority=5))
    queue.unschedulable("uid-a")
    assert queue.entries["uid-a"].where is Where.BACKOFF
    clock.now += 1.1
    assert popped(queue) == ["a"]


def test_parked_pods_are_flushed_periodically(queue: SchedulingQueue, clock: Clock) -> None:
    queue.add_or_update(pod_info("a"))
    queue.pop_nowait()
    queue.unschedulable("uid-a")

    async def pop() -> str:
        entry = await queue.pop(flush_interval=0.01)
        return entry.pod.name

    clock.now += 31
    assert asyncio.run(pop()) == "a"


def test_removed_pods_leave_every_sub_queue(queue: SchedulingQueue) -> None:
    queue.add_or_update(pod_info("a"))
    queue.add_or_update(pod_info("b"))
    queue.remove("uid-a")
    assert popped(queue) == ["b"]
    queue.backoff("uid-b")
    queue.remove("uid-b")
    assert len(queue) == 0
    assert queue.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "in_flight": 0}


async def test_pop_wakes_up_when_a_pod_arrives(queue: SchedulingQueue) -> None:
    waiter = asyncio.create_task(queue.pop(flush_interval=10))
    await asyncio.sleep(0)
    queue.add_or_update(pod_info("late"))
    entry = await asyncio.wait_for(waiter, timeout=5)
    assert entry.pod.name == "late"
