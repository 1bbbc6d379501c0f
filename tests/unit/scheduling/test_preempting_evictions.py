"""Acting on a preemption, as kube-scheduler's executor does: nominate, mark and evict the victims, tell
them who preempted them; a PodDisruptionBudget's refusal is reported and the preemptor retried."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from promsched.scheduling.binding.evicting import Evictor
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.preemption_candidates import Candidate
from promsched.scheduling.objects.disruption_budgets import DisruptionBudget
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.queues import MAX_BACKOFF, SchedulingQueue, Where
from support.clocks import Clock
from support.fake_apis import FakeSender
from support.objects import node, pod, pod_object
from support.placement import cache_with

CONDITION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "PreemptionByScheduler",
    "message": "promsched: preempting to accommodate a higher priority pod",
}


class Setup:
    def __init__(self, cache: ClusterCache, queue: SchedulingQueue | None = None) -> None:
        self.sender = FakeSender()
        self.cache = cache
        self.queue = SchedulingQueue() if queue is None else queue
        self.tasks: list[asyncio.Task[None]] = []
        self.preempted: list[tuple[str, str, str, str]] = []
        self.evictor = Evictor(
            self.sender,
            cache,
            self.queue,
            spawn=self._spawn,
            report_preempted=lambda victim, by, node, scheduler: self.preempted.append(
                (victim.name, by.name, node, scheduler)
            ),
        )

    def _spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self.tasks.append(task)
        return task

    async def settle(self) -> None:
        await asyncio.gather(*self.tasks)

    def sent(self) -> list[tuple[str, str, Any]]:
        return [(r.method, r.path, r.body) for r in self.sender.sent]


def victim(name: str, **options: Any) -> PodInfo:
    return pod(name, node_name="n1", **options)


@pytest.fixture
def setup() -> Setup:
    return Setup(cache_with([node("n1")], [victim("v1"), victim("v2")]))


def plan(*victims: PodInfo) -> Candidate:
    return Candidate("n1", victims, 0)


def status_path(name: str) -> str:
    return f"/api/v1/namespaces/ns/pods/{name}/status"


def without_time(body: Any) -> Any:
    conditions = body["status"].get("conditions") if isinstance(body, dict) and "status" in body else None
    if conditions:
        return {
            "status": {
                "conditions": [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions]
            }
        }
    return body


async def test_the_preemptor_is_nominated_and_each_victim_marked_then_evicted(setup: Setup) -> None:
    urgent = pod("urgent", priority=1000)
    setup.evictor.preempt(urgent, plan(*setup.cache.node_pods["n1"].values()), "promsched")
    # The node is held at once, before any request is answered.
    assert setup.cache.nominations == {"uid-urgent": "n1"}
    await setup.settle()
    sent = [(method, path, without_time(body)) for method, path, body in setup.sent()]
    assert sent[0] == ("PATCH", status_path("urgent"), {"status": {"nominatedNodeName": "n1"}})
    for name in ("v1", "v2"):
        mark = ("PATCH", status_path(name), {"status": {"conditions": [CONDITION]}})
        eviction = (
            "POST",
            f"/api/v1/namespaces/ns/pods/{name}/eviction",
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": "ns"},
                "deleteOptions": {"preconditions": {"uid": f"uid-{name}"}},
            },
        )
        assert sent.index(mark) < sent.index(eviction)
    assert sorted(setup.preempted) == [
        ("v1", "urgent", "n1", "promsched"),
        ("v2", "urgent", "n1", "promsched"),
    ]
    assert setup.cache.preempted == {"uid-v1", "uid-v2"}


async def test_a_victim_already_terminating_or_marked_gets_no_second_request(setup: Setup) -> None:
    marked = pod_object("marked", node_name="n1")
    marked["status"]["conditions"] = [CONDITION]
    terminating = victim("leaving", deleting=True)
    setup.evictor.preempt(
        pod("urgent", priority=1000), plan(PodInfo.from_object(marked), terminating), "promsched"
    )
    await setup.settle()
    paths = [path for _, path, _ in setup.sent()]
    assert status_path("marked") not in paths
    assert "/api/v1/namespaces/ns/pods/marked/eviction" in paths
    assert not any("leaving" in path for path in paths)


async def test_a_refusal_by_a_disruption_budget_is_reported_and_the_preemptor_retried(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    urgent = pod("urgent", priority=1000)
    setup.queue.add_or_update(urgent)
    setup.queue.pop_nowait()
    setup.queue.unschedulable(urgent.uid)
    setup.sender.fail["/v2/eviction"] = 429
    refused = REGISTRY.get_sample_value("promsched_preemption_evictions_total", {"result": "refused"}) or 0
    setup.evictor.preempt(urgent, plan(*setup.cache.node_pods["n1"].values()), "promsched")
    await setup.settle()
    after = REGISTRY.get_sample_value("promsched_preemption_evictions_total", {"result": "refused"})
    assert after == refused + 1
    assert "the eviction of ns/v2 was refused (a PodDisruptionBudget allows no disruption now)" in caplog.text
    assert setup.queue.entries[urgent.uid].where is Where.BACKOFF
    assert [victim for victim, *_ in setup.preempted] == ["v1"]


async def test_a_victim_already_gone_is_no_failure(setup: Setup) -> None:
    urgent = pod("urgent", priority=1000)
    setup.queue.add_or_update(urgent)
    setup.queue.pop_nowait()
    setup.queue.unschedulable(urgent.uid)
    setup.sender.fail["/v1/status"] = 404
    setup.sender.fail["/v2/eviction"] = 404
    setup.evictor.preempt(urgent, plan(*setup.cache.node_pods["n1"].values()), "promsched")
    await setup.settle()
    assert "/api/v1/namespaces/ns/pods/v1/eviction" not in [path for _, path, _ in setup.sent()]
    assert setup.queue.entries[urgent.uid].where is Where.UNSCHEDULABLE


async def test_lower_priority_pods_nominated_to_the_node_lose_their_nomination(setup: Setup) -> None:
    lower = PodInfo.from_object({**pod_object("lower", priority=10), "status": {"nominatedNodeName": "n1"}})
    higher = pod("higher", priority=5000)
    setup.cache.nominate(lower)
    setup.cache.nominate(higher, "n1")
    setup.evictor.preempt(pod("urgent", priority=1000), plan(), "promsched")
    assert setup.cache.nominations == {"uid-higher": "n1", "uid-urgent": "n1"}
    await setup.settle()
    assert ("PATCH", status_path("lower"), {"status": {"nominatedNodeName": None}}) in setup.sent()


async def test_a_parked_pod_whose_nomination_is_cleared_is_retried(clock: Clock) -> None:
    """kube requeues the lower-priority pods it takes the node from, so they look elsewhere at once
    rather than wait for an event of their own."""
    setup = Setup(cache_with([node("n1")]), SchedulingQueue(clock=clock))
    lower = PodInfo.from_object({**pod_object("lower", priority=10), "status": {"nominatedNodeName": "n1"}})
    higher = PodInfo.from_object(
        {**pod_object("higher", priority=5000), "status": {"nominatedNodeName": "n1"}}
    )
    for nominated in (lower, higher):
        setup.cache.nominate(nominated)
        setup.queue.add_or_update(nominated)
        setup.queue.pop_nowait()
        setup.queue.unschedulable(nominated.uid)
    clock.advance(MAX_BACKOFF)
    setup.evictor.preempt(pod("urgent", priority=1000), plan(), "promsched")
    assert setup.queue.entries[lower.uid].where is Where.ACTIVE
    assert setup.queue.entries[higher.uid].where is Where.UNSCHEDULABLE
    await setup.settle()


async def test_a_displaced_pod_nominated_elsewhere_meanwhile_keeps_that_nomination(setup: Setup) -> None:
    lower = PodInfo.from_object({**pod_object("lower", priority=10), "status": {"nominatedNodeName": "n1"}})
    setup.cache.nominate(lower)
    setup.evictor.preempt(pod("urgent", priority=1000), plan(), "promsched")
    # Retried before the clearing patch went out, it preempts on another node.
    setup.evictor.preempt(lower, Candidate("n2", (), 0), "promsched")
    await setup.settle()
    patches = [body for _, path, body in setup.sent() if path == status_path("lower")]
    assert patches == [{"status": {"nominatedNodeName": "n2"}}]
    assert setup.cache.nominations["uid-lower"] == "n2"


async def test_a_nomination_no_longer_worth_holding_is_cleared(setup: Setup) -> None:
    waiting = PodInfo.from_object({**pod_object("waiting"), "status": {"nominatedNodeName": "n1"}})
    setup.cache.nominate(waiting)
    setup.evictor.clear_nomination(waiting)
    await setup.settle()
    assert setup.cache.nominations == {}
    assert setup.sent() == [("PATCH", status_path("waiting"), {"status": {"nominatedNodeName": None}})]


def budget(allowed: int) -> DisruptionBudget:
    return DisruptionBudget.from_object(
        {
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": allowed},
        }
    )


def queued(setup: Setup, preemptor: PodInfo) -> PodInfo:
    setup.queue.add_or_update(preemptor)
    setup.queue.pop_nowait()
    setup.queue.unschedulable(preemptor.uid)
    return preemptor


def nominated_to_n1(name: str, priority: int) -> PodInfo:
    return PodInfo.from_object(
        {**pod_object(name, priority=priority), "status": {"phase": "Pending", "nominatedNodeName": "n1"}}
    )


async def test_a_victim_its_budget_refused_is_not_asked_again_until_the_budget_changes() -> None:
    """A preemptor retried after every backoff would otherwise send an eviction, a mark and its
    rollback, and a nomination each time, for as long as the budget allows no disruption."""
    guarded = victim("db", labels={"app": "db"})
    setup = Setup(cache_with([node("n1")], [victim("v1"), guarded]))
    setup.cache.upsert_budget(budget(0))
    setup.sender.fail["/db/eviction"] = 429
    urgent = queued(setup, pod("urgent", priority=1000))
    setup.evictor.preempt(urgent, plan(victim("v1"), guarded), "promsched")
    await setup.settle()
    assert "/api/v1/namespaces/ns/pods/db/eviction" in setup.sender.paths("POST")
    assert [name for name, *_ in setup.preempted] == ["v1"]
    # Retried after its backoff: nominated now, v1 terminating, the same budget as it was.
    sent = len(setup.sender.sent)
    retried = queued(setup, nominated_to_n1("urgent", 1000))
    setup.evictor.preempt(retried, plan(victim("v1", deleting=True), guarded), "promsched")
    await setup.settle()
    assert setup.sender.sent[sent:] == []
    assert setup.queue.entries[retried.uid].where is Where.BACKOFF
    # The disruption controller allows one disruption: the next try evicts it.
    setup.cache.upsert_budget(budget(1))
    del setup.sender.fail["/db/eviction"]
    setup.evictor.preempt(retried, plan(guarded), "promsched")
    await setup.settle()
    assert setup.sender.paths("POST")[-1] == "/api/v1/namespaces/ns/pods/db/eviction"
    assert [name for name, *_ in setup.preempted] == ["v1", "db"]
    assert setup.evictor.refused == {}


async def test_a_victim_held_back_holds_back_the_others_of_its_preemption() -> None:
    """Evicting them would disrupt them for a preemption that cannot complete."""
    guarded = victim("db", labels={"app": "db"})
    setup = Setup(cache_with([node("n1")], [victim("v1"), guarded]))
    setup.cache.upsert_budget(budget(0))
    setup.sender.fail["/db/eviction"] = 429
    urgent = queued(setup, nominated_to_n1("urgent", 1000))
    setup.evictor.preempt(urgent, plan(guarded), "promsched")
    await setup.settle()
    setup.evictor.preempt(urgent, plan(victim("v1"), guarded), "promsched")
    await setup.settle()
    assert not any("/pods/v1/" in path for path in setup.sender.paths())


async def test_a_refusal_no_budget_explains_is_asked_again(setup: Setup) -> None:
    """A 429 from the API server's flow control, or a budget the cache does not hold yet."""
    setup.sender.fail["/v2/eviction"] = 429
    urgent = queued(setup, nominated_to_n1("urgent", 1000))
    for _ in range(2):
        setup.evictor.preempt(urgent, plan(victim("v2")), "promsched")
        await setup.settle()
    assert setup.sender.paths("POST") == ["/api/v1/namespaces/ns/pods/v2/eviction"] * 2
    assert setup.evictor.refused == {}


@pytest.mark.parametrize(("status", "taken_back"), [(429, True), (403, True), (500, False)])
async def test_a_refused_victims_mark_is_taken_back(setup: Setup, status: int, taken_back: bool) -> None:
    """No disruption follows a refusal, so the victim does not keep DisruptionTarget=True (a Job's
    podFailurePolicy would take its later failure for one). After a 5xx the eviction may be under way,
    and the mark stays, as kube keeps it after a failed delete."""
    setup.sender.fail["/v2/eviction"] = status
    setup.evictor.preempt(pod("urgent", priority=1000), plan(victim("v1"), victim("v2")), "promsched")
    await setup.settle()
    marks = [without_time(body) for body in setup.sender.bodies(status_path("v2"))]
    unmark = {"status": {"conditions": [{"type": "DisruptionTarget", "$patch": "delete"}]}}
    assert marks == [{"status": {"conditions": [CONDITION]}}, *([unmark] if taken_back else [])]
    # The accepted eviction's victim keeps its mark.
    assert len(setup.sender.bodies(status_path("v1"))) == 1
