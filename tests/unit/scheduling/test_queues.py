"""The scheduling queue: order, backoff, parking of unschedulable pods, one entry per pod."""

from __future__ import annotations

import asyncio

import pytest

from promsched.scheduling.cycle.deciding import decide
from promsched.scheduling.filters.fit import NodeResourcesFit
from promsched.scheduling.filters.taints import TaintToleration
from promsched.scheduling.framework import ClusterEvent
from promsched.scheduling.objects.pods import PodCondition
from promsched.scheduling.queues import MAX_BACKOFF, SchedulingQueue, Where, backoff_seconds
from support.clocks import Clock
from support.objects import node, pod, pod_info
from support.placement import cache_with
from support.snapshots import cpu_snapshot


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

    clock.now += queue.max_unschedulable_seconds + 1  # kube's podMaxInUnschedulablePodsDuration: 5 min
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


def test_a_parked_pod_goes_back_only_on_an_event_its_rejecting_filters_declared(
    queue: SchedulingQueue, clock: Clock
) -> None:
    queue.add_or_update(pod_info("tainted-out"))
    queue.add_or_update(pod_info("too-big"))
    queue.pop_nowait()
    queue.pop_nowait()
    queue.unschedulable("uid-tainted-out", TaintToleration.events)
    queue.unschedulable("uid-too-big", NodeResourcesFit.events)
    clock.now += MAX_BACKOFF
    assert queue.move_all_to_active("pod deleted", ClusterEvent.ASSIGNED_POD_DELETED) == 1
    assert popped(queue) == ["too-big"]
    assert queue.move_all_to_active("metrics refreshed", ClusterEvent.METRICS_REFRESHED) == 0
    assert queue.move_all_to_active("node changed", ClusterEvent.NODE_UPDATED) == 1
    assert popped(queue) == ["tainted-out"]


def test_decide_says_which_events_may_lift_a_rejection() -> None:
    tainted = node("n2", cpu="1", taints=[{"key": "k", "effect": "NoSchedule"}])
    cache = cache_with([node("n1", cpu="1"), tainted])
    outcome = decide(pod("big", cpu="2"), cache, cpu_snapshot({"n1": 10.0, "n2": 10.0}))
    assert outcome.node is None
    # Too big for n1 (room frees when a pod goes) and tainted n2 (its taints may change).
    assert outcome.lifted_by == (ClusterEvent.NODE_ADDED | NodeResourcesFit.events | TaintToleration.events)
    assert not outcome.lifted_by & ClusterEvent.METRICS_REFRESHED


def test_our_own_podscheduled_patch_does_not_retry_a_parked_pod(queue: SchedulingQueue) -> None:
    queue.add_or_update(pod_info("a"))
    queue.pop_nowait()
    queue.unschedulable("uid-a")
    told = PodCondition("False", "Unschedulable", "0/3 nodes are available.", "T1")
    queue.add_or_update(pod_info("a", resource_version="2", scheduled_condition=told))
    assert queue.entries["uid-a"].where is Where.UNSCHEDULABLE
    assert queue.entries["uid-a"].pod.scheduled_condition == told  # the newest state is kept


def test_pods_retried_by_uid_leave_the_parked_set_through_their_backoff(
    queue: SchedulingQueue, clock: Clock
) -> None:
    for name in ("displaced", "other", "waiting"):
        queue.add_or_update(pod_info(name))
    assert popped(queue) == ["displaced", "other", "waiting"]
    queue.unschedulable("uid-displaced")
    queue.unschedulable("uid-other")
    queue.backoff("uid-waiting")
    # Only parked pods move (one in backoff already waits for its turn), and not before their backoff.
    assert queue.retry(["uid-displaced", "uid-waiting", "uid-gone"]) == 1
    assert queue.entries["uid-displaced"].where is Where.BACKOFF
    assert queue.entries["uid-other"].where is Where.UNSCHEDULABLE
    clock.advance(backoff_seconds(1))
    assert sorted(popped(queue)) == ["displaced", "waiting"]
