"""The scheduler without a cluster: watch events in, requests out (recorded by a fake sender)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from promsched.api.policies import parse_spec
from promsched.api.statuses import Decision
from promsched.kube.requests import Request
from promsched.metrics import Snapshot, plan_from_policy
from promsched.metrics.planning import Plan
from promsched.metrics.scoring import NodeResult, ScoreMemo
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import Outcome, decide, feasible_nodes_to_find
from promsched.scheduling.filters import DEFAULT_FILTERS
from promsched.scheduling.intake.kinds import NODES, PODS
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.policies.decisions import TOP_NODES, shown
from promsched.scheduling.policies.recording import PolicyStatus
from promsched.scheduling.queues import Where
from promsched.scheduling.schedulers import Scheduler
from support.fake_apis import FakeSender
from support.objects import node_object, pod_object
from support.policies import policy_object, spec_document
from support.polling import eventually_async
from support.preemption import no_victims
from support.snapshots import snapshot_of

LOADS = {
    "cpu": {"busy": 90.0, "idle": 10.0, "mid": 50.0},
    "memory": {"busy": 80.0, "idle": 20.0, "mid": 50.0},
}


class FakeRefresher:
    """Stands in for the metrics Refresher: a fixed snapshot of LOADS, no network."""

    def __init__(self, plan: Plan, endpoint: object, nodes: Callable[[], object], **_: object) -> None:
        self.plan = plan
        # Taken now: scoring judges staleness by the wall clock.
        self.latest = snapshot_of(plan, LOADS, at=time.time())

    def start(self) -> None: ...

    async def refresh(self) -> Snapshot:
        return self.latest

    async def engine(self) -> str | None:
        return None

    async def update(self, plan: Plan, endpoint: object) -> bool:
        self.plan, self.latest = plan, snapshot_of(plan, LOADS, at=time.time())
        return True

    async def stop(self) -> None: ...

    def scores_for(self, snapshot: Snapshot) -> ScoreMemo:
        return ScoreMemo()


def policy(name: str = "p", created: str = "2026-01-01T00:00:00Z", **spec: Any) -> dict[str, Any]:
    prometheus = {"url": "http://prometheus:9090"}
    plugins = ({"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1})
    return policy_object(name, spec_document(*plugins, prometheus=prometheus, **spec), created=created)


@pytest.fixture
def sender() -> FakeSender:
    return FakeSender()


@pytest.fixture
async def scheduler(sender: FakeSender) -> Scheduler:
    scheduler = Scheduler(sender, refresher_factory=FakeRefresher, rng=random.Random(7))
    for name in ("busy", "idle", "mid"):
        scheduler.intake.on_event(NODES, "ADDED", node_object(name))
    await scheduler.on_policy("ADDED", policy())
    return scheduler


async def settle(scheduler: Scheduler) -> None:
    """Let the scheduler's background writes finish."""
    while scheduler._tasks:
        await asyncio.wait(list(scheduler._tasks))


async def cycle(scheduler: Scheduler) -> None:
    entry = scheduler.queue.pop_nowait()
    assert entry is not None
    scheduler.schedule_one(entry)
    await settle(scheduler)


async def failed_huge_pod(scheduler: Scheduler) -> dict[str, Any]:
    """`huge`, a pod no node fits, added and failed by one scheduling cycle."""
    huge = pod_object("huge", cpu="64")
    scheduler.intake.on_event(PODS, "ADDED", huge)
    await cycle(scheduler)
    return huge


def series_counts(sender: FakeSender) -> list[int]:
    """The counts of the event series patches sent, in order."""
    return [r.body["series"]["count"] for r in sender.sent if r.method == "PATCH" and "/events/" in r.path]


async def test_a_pod_is_bound_to_the_least_loaded_node_with_its_decision(
    scheduler: Scheduler, sender: FakeSender
) -> None:
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web"))
    await cycle(scheduler)
    [binding] = sender.bodies("/pods/web/binding")
    assert binding["target"]["name"] == "idle"
    assert binding["metadata"]["uid"] == "uid-web"
    annotation = json.loads(binding["metadata"]["annotations"]["promsched.io/decision"])
    assert [n["node"] for n in annotation["top"]] == ["idle", "mid", "busy"]
    [event] = sender.bodies("/namespaces/ns/events")
    assert (event["reason"], event["note"]) == ("Scheduled", "Successfully assigned ns/web to idle")
    assert scheduler.policies["p"].status.scheduled == 1


async def test_status_writes_are_coalesced(scheduler: Scheduler, sender: FakeSender) -> None:
    for index in range(5):
        scheduler.intake.on_event(PODS, "ADDED", pod_object(f"web-{index}"))
        await cycle(scheduler)
    sender.sent.clear()
    await scheduler.flush_statuses()
    await scheduler.flush_statuses()
    [status] = sender.bodies("/schedulingpolicies/p/status")
    assert status["status"]["scheduled"] == 5
    assert len(status["status"]["recentDecisions"]) == 5


async def test_a_pod_seen_again_while_its_binding_is_in_flight_is_not_queued_twice(
    scheduler: Scheduler,
) -> None:
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web"))
    entry = scheduler.queue.pop_nowait()
    assert entry is not None
    scheduler.schedule_one(entry)  # the binding task has not run yet
    scheduler.intake.on_event(PODS, "MODIFIED", pod_object("web"))
    assert len(scheduler.queue) == 0
    await settle(scheduler)


async def test_a_conflicting_binding_is_dropped_and_forgotten(
    scheduler: Scheduler, sender: FakeSender
) -> None:
    sender.fail["/binding"] = 409
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web"))
    await cycle(scheduler)
    assert scheduler.cache.usage_of("idle").pods == 0
    assert len(scheduler.queue) == 0


@pytest.mark.parametrize("status", [404, 500])
async def test_a_failed_binding_gives_its_room_to_pods_parked_for_it(
    scheduler: Scheduler, sender: FakeSender, status: int
) -> None:
    scheduler.intake.on_event(PODS, "ADDED", pod_object("huge", cpu="64"))
    await cycle(scheduler)
    assert scheduler.queue.entries["uid-huge"].where is Where.UNSCHEDULABLE
    sender.fail["/binding"] = status
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web"))
    await cycle(scheduler)
    # As kube-scheduler after a failed binding cycle (AssignedPodDelete): the parked pod is tried again.
    assert scheduler.queue.entries["uid-huge"].where is not Where.UNSCHEDULABLE


async def test_a_failed_binding_is_retried_after_backoff(scheduler: Scheduler, sender: FakeSender) -> None:
    sender.fail["/binding"] = 500
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web"))
    await cycle(scheduler)
    assert scheduler.cache.usage_of("idle").pods == 0
    assert scheduler.queue.entries["uid-web"].where is Where.BACKOFF
    assert scheduler.policies["p"].status.errors == 1


async def test_a_pod_that_fits_nowhere_is_told_why(scheduler: Scheduler, sender: FakeSender) -> None:
    scheduler.intake.on_event(PODS, "ADDED", pod_object("huge", cpu="64"))
    await cycle(scheduler)
    assert scheduler.queue.entries["uid-huge"].where is Where.UNSCHEDULABLE
    [patch] = sender.bodies("/pods/huge/status")
    assert patch["status"]["conditions"][0]["reason"] == "Unschedulable"
    [event] = sender.bodies("/namespaces/ns/events")
    assert event["reason"] == "FailedScheduling"
    assert event["note"] == "0/3 nodes are available: 3 Insufficient cpu." + no_victims(3)
    # A node being added may make room: the pod is tried again.
    scheduler.intake.on_event(NODES, "ADDED", node_object("big"))
    assert scheduler.queue.entries["uid-huge"].where in (Where.ACTIVE, Where.BACKOFF)


async def test_constraints_promsched_cannot_honour_are_refused_by_name(
    scheduler: Scheduler, sender: FakeSender
) -> None:
    scheduler.intake.on_event(
        PODS, "ADDED", pod_object("dra", resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu"}])
    )
    await cycle(scheduler)
    assert not sender.bodies("/binding")
    [event] = sender.bodies("/namespaces/ns/events")
    assert event["note"] == "spec.resourceClaims is not supported by promsched yet"


async def test_a_pod_whose_spec_cannot_be_read_is_told_which_field(
    scheduler: Scheduler, sender: FakeSender
) -> None:
    scheduler.intake.on_event(PODS, "ADDED", pod_object("bad", tolerations="nope"))
    await settle(scheduler)
    assert "uid-bad" not in scheduler.queue.entries
    assert not sender.bodies("/binding")
    reason = "invalid pod spec: spec.tolerations: expected a list of objects, got 'nope'"
    [patch] = sender.bodies("/pods/bad/status")
    [condition] = patch["status"]["conditions"]
    assert (condition["status"], condition["message"]) == ("False", reason)
    [event] = sender.bodies("/namespaces/ns/events")
    assert (event["reason"], event["note"]) == ("FailedScheduling", reason)


async def test_pods_of_other_schedulers_and_bound_pods_are_left_alone(scheduler: Scheduler) -> None:
    scheduler.intake.on_event(PODS, "ADDED", pod_object("theirs", schedulerName="default-scheduler"))
    scheduler.intake.on_event(PODS, "ADDED", pod_object("placed", nodeName="busy"))
    scheduler.intake.on_event(PODS, "ADDED", pod_object("gated", schedulingGates=[{"name": "wait"}]))
    assert len(scheduler.queue) == 0
    assert scheduler.cache.usage_of("busy").pods == 1


async def test_a_gated_pod_is_queued_once_its_gates_are_lifted(scheduler: Scheduler) -> None:
    scheduler.intake.on_event(PODS, "ADDED", pod_object("gated", schedulingGates=[{"name": "wait"}]))
    assert len(scheduler.queue) == 0
    scheduler.intake.on_event(PODS, "MODIFIED", pod_object("gated"))
    assert "uid-gated" in scheduler.queue.entries


PREFERS_BUSY = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 1,
                "preference": {
                    "matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["busy"]}
                    ]
                },
            }
        ]
    }
}


async def scheduler_with(sender: FakeSender, **spec: Any) -> Scheduler:
    scheduler = Scheduler(sender, refresher_factory=FakeRefresher, rng=random.Random(7))
    for name in ("busy", "idle", "mid"):
        scheduler.intake.on_event(NODES, "ADDED", node_object(name))
    await scheduler.on_policy("ADDED", policy(**spec))
    return scheduler


@pytest.mark.parametrize(("weight", "chosen"), [(0, "idle"), (100, "busy")])
async def test_the_policys_preference_weight_sets_what_preferences_count(
    sender: FakeSender, weight: int, chosen: str
) -> None:
    scheduler = await scheduler_with(sender, placementPreferences={"weight": weight})
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web", affinity=PREFERS_BUSY))
    await cycle(scheduler)
    [binding] = sender.bodies("/pods/web/binding")
    assert binding["target"]["name"] == chosen


async def test_preferences_past_twenty_plugins_stay_out_of_the_status_only(sender: FakeSender) -> None:
    plugins = [{"name": "cpu"}, *({"name": f"custom{index}", "query": "up"} for index in range(19))]
    scheduler = await scheduler_with(sender, plugins=plugins)
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web", affinity=PREFERS_BUSY))
    await cycle(scheduler)
    [binding] = sender.bodies("/pods/web/binding")
    annotation = json.loads(binding["metadata"]["annotations"]["promsched.io/decision"])
    assert "NodeAffinity" in annotation["top"][0]["plugins"]
    shown = scheduler.policies["p"].status.decisions[-1].top_nodes[0].plugins
    assert [plugin.name for plugin in shown] == [plugin["name"] for plugin in plugins]


async def test_a_decision_shown_after_a_policy_change_keeps_the_generation_it_was_made_by(
    scheduler: Scheduler,
) -> None:
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web"))
    await cycle(scheduler)
    changed = policy()
    changed["metadata"]["generation"] = 2
    await scheduler.on_policy("MODIFIED", changed)
    body = scheduler.policies["p"].status.to_status()
    assert (body["lastDecision"]["pod"], body["lastDecision"]["generation"]) == ("ns/web", 1)


async def test_the_younger_of_two_policies_for_one_name_is_in_conflict(scheduler: Scheduler) -> None:
    await scheduler.on_policy("ADDED", policy("younger", created="2026-06-01T00:00:00Z"))
    younger = scheduler.policies["younger"]
    conditions = {c.type: c.status.value for c in younger.status.conditions}
    assert conditions["Conflict"] == "True"
    assert conditions["Ready"] == "False"
    assert scheduler.owners["promsched"].name == "p"
    await scheduler.on_policy("DELETED", policy())
    assert scheduler.owners["promsched"].name == "younger"


async def test_shadow_mode_records_and_binds_nothing(scheduler: Scheduler, sender: FakeSender) -> None:
    await scheduler.on_policy("ADDED", policy("shadow", schedulerName="default-scheduler", mode="Shadow"))
    scheduler.intake.on_event(PODS, "ADDED", pod_object("theirs", schedulerName="default-scheduler"))
    await cycle(scheduler)
    assert not sender.bodies("/binding")
    status = scheduler.policies["shadow"].status
    assert status.decisions[-1].node == "idle"
    scheduler.intake.on_event(PODS, "MODIFIED", pod_object("theirs", schedulerName="default-scheduler"))
    assert len(scheduler.queue) == 0


async def test_a_prometheus_outside_the_allowlist_is_refused(sender: FakeSender) -> None:
    scheduler = Scheduler(
        sender, refresher_factory=FakeRefresher, allowed_prometheus_hosts=frozenset({"prometheus.monitoring"})
    )
    await scheduler.on_policy("ADDED", policy())
    runtime = scheduler.policies["p"]
    assert runtime.refresher is None
    ready = next(c for c in runtime.status.conditions if c.type == "Ready")
    assert ready.reason == "InvalidPolicy"
    assert "spec.prometheus.url: host 'prometheus' is not in the operator's allowlist" in ready.message


def test_a_burst_spreads_because_placements_weigh_on_their_node() -> None:
    plan = plan_from_policy(parse_spec(policy()["spec"]))
    taken = time.time()
    snapshot = snapshot_of(plan, {"cpu": {"a": 10.0, "b": 20.0}, "memory": {"a": 10.0, "b": 20.0}}, at=taken)
    cache = ClusterCache(clock=lambda: taken + 1)
    for name in ("a", "b"):
        cache.upsert_node(NodeInfo.from_object(node_object(name)))
    chosen = []
    for index in range(6):
        incoming = PodInfo.from_object(pod_object(f"p{index}", cpu="1"))
        outcome = decide(incoming, cache, snapshot)
        assert outcome.node is not None
        cache.assume(incoming, outcome.node)
        chosen.append(outcome.node)
    # Each 1-CPU pod adds 25% CPU load to its node while the metrics cannot show it: the two nodes alternate.
    assert chosen.count("a") == 3
    assert chosen.count("b") == 3


async def test_the_cluster_is_listed_before_the_first_cycle(sender: FakeSender) -> None:
    sender.answers["/api/v1/nodes"] = {"items": [node_object("n1")]}
    sender.answers["/api/v1/pods"] = {"items": [pod_object("running", nodeName="n1"), pod_object("waiting")]}
    scheduler = Scheduler(sender, refresher_factory=FakeRefresher)
    await scheduler.sync()
    assert scheduler.synced.is_set()
    assert scheduler.cache.usage_of("n1").pods == 1
    assert "uid-waiting" in scheduler.pending


async def test_an_older_state_of_a_pod_arriving_late_is_ignored(scheduler: Scheduler) -> None:
    placed = pod_object("web", nodeName="idle")
    placed["metadata"]["resourceVersion"] = "7"
    scheduler.intake.on_event(PODS, "ADDED", placed)
    # resourceVersion 1: from a list taken earlier
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web"))
    assert "uid-web" not in scheduler.pending
    assert scheduler.cache.usage_of("idle").pods == 1


async def test_a_policy_places_nothing_before_its_first_metrics(
    scheduler: Scheduler, sender: FakeSender
) -> None:
    runtime = scheduler.policies["p"]
    assert runtime.refresher is not None
    runtime.refresher.latest = Snapshot.empty(runtime.refresher.plan, time.time())
    scheduler.intake.on_event(PODS, "ADDED", pod_object("early"))
    await cycle(scheduler)
    assert sender.sent == []
    assert scheduler.queue.entries["uid-early"].where is Where.UNSCHEDULABLE


def test_an_unschedulable_decision_clears_the_node_of_the_last_one() -> None:
    status = PolicyStatus(history=5)
    base = {"time": "2026-11-29T00:00:00Z", "latencyMs": 1, "generation": 1, "mode": "Enforce"}
    status.record_scheduled("uid-a", Decision.model_validate({**base, "pod": "ns/a", "node": "n1"}))
    status.record_unschedulable("uid-b", "no fit", Decision.model_validate({**base, "pod": "ns/b"}))
    assert status.to_status()["lastDecision"]["node"] is None


async def test_a_node_cordoned_between_scoring_and_binding_is_not_bound_to(
    scheduler: Scheduler, sender: FakeSender
) -> None:
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web"))
    entry = scheduler.queue.pop_nowait()
    assert entry is not None
    outcome = scheduler.schedule_one(entry)  # the binding task waits for the loop
    assert outcome is not None
    assert outcome.node == "idle"
    cordoned = node_object("idle", unschedulable=True)
    cordoned["metadata"]["resourceVersion"] = "2"
    scheduler.intake.on_event(NODES, "MODIFIED", cordoned)
    await settle(scheduler)
    assert not sender.bodies("/binding")
    assert scheduler.cache.usage_of("idle").pods == 0
    assert scheduler.queue.entries["uid-web"].where is Where.BACKOFF


class GatedSender(FakeSender):
    """Holds every binding until `gate` opens, counting those in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.most_in_flight = 0

    async def send(self, request: Request) -> Any:
        if request.path.endswith("/binding"):
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            await self.gate.wait()
            self.in_flight -= 1
        return await super().send(request)


async def test_the_loop_takes_no_pod_while_the_bindings_in_flight_are_at_their_limit() -> None:
    sender = GatedSender()
    scheduler = Scheduler(sender, refresher_factory=FakeRefresher, rng=random.Random(7), bind_concurrency=2)
    for name in ("busy", "idle", "mid"):
        scheduler.intake.on_event(NODES, "ADDED", node_object(name))
    await scheduler.on_policy("ADDED", policy())
    for index in range(6):
        scheduler.intake.on_event(PODS, "ADDED", pod_object(f"web-{index}"))
    loop = asyncio.create_task(scheduler.run())
    try:
        await eventually_async(lambda: sender.in_flight == 2, what="two bindings in flight")
        for _ in range(20):
            await asyncio.sleep(0)
        # The other pods wait in the queue, undecided, rather than as decisions waiting for a slot.
        assert len(scheduler.queue) == 4
        assert len(scheduler.cache.assumed) == 2
        sender.gate.set()
        await eventually_async(lambda: len(sender.bodies("/binding")) == 6, what="all six bound")
        assert sender.most_in_flight == 2
    finally:
        loop.cancel()
        await asyncio.wait([loop])
        await scheduler.close()


@pytest.mark.parametrize(
    ("nodes", "searched"), [(6, 6), (99, 99), (100, 100), (1000, 420), (5000, 500), (20000, 1000)]
)
def test_large_clusters_are_searched_in_part_as_kube_does(nodes: int, searched: int) -> None:
    assert feasible_nodes_to_find(nodes) == searched


def test_each_search_starts_where_the_last_one_stopped() -> None:
    plan = plan_from_policy(parse_spec(policy()["spec"]))
    names = [f"n{index:03}" for index in range(200)]
    snapshot = snapshot_of(plan, {"cpu": dict.fromkeys(names, 10.0)}, at=time.time())
    cache = ClusterCache()
    for name in names:
        cache.upsert_node(NodeInfo.from_object(node_object(name)))
    start = 0
    for index in range(4):
        outcome = decide(PodInfo.from_object(pod_object(f"p{index}")), cache, snapshot, start=start)
        start = outcome.next_start
        # 100 of the 200 nodes are enough; the next pod searches the other half.
        half = names[:100] if index % 2 == 0 else names[100:]
        assert sorted(r.node for r in outcome.ranked) == half
        assert start == (index + 1) * 100 % 200


class ExplodingFilter:
    """A filter with a bug that only one pod triggers."""

    name = "Exploding"

    def concerns(self, pod: PodInfo) -> bool:
        return True

    def filter(self, pod: PodInfo, node: NodeInfo, usage: object) -> str | None:
        if pod.name == "bad":
            raise RuntimeError("a bug in a filter")
        return None


async def test_an_exception_in_one_pods_cycle_leaves_the_loop_running_and_the_pod_backed_off() -> None:
    sender = FakeSender()
    scheduler = Scheduler(
        sender,
        refresher_factory=FakeRefresher,
        rng=random.Random(7),
        filters=(ExplodingFilter(), *DEFAULT_FILTERS),
    )
    for name in ("busy", "idle", "mid"):
        scheduler.intake.on_event(NODES, "ADDED", node_object(name))
    await scheduler.on_policy("ADDED", policy())
    scheduler.intake.on_event(PODS, "ADDED", pod_object("bad"))
    scheduler.intake.on_event(PODS, "ADDED", pod_object("good"))
    loop = asyncio.create_task(scheduler.run())
    try:
        await eventually_async(
            lambda: len(sender.bodies("/pods/good/binding")) == 1, what="the good pod bound"
        )
        assert not loop.done()
        assert scheduler.queue.entries["uid-bad"].where is Where.BACKOFF
        assert sender.bodies("/pods/bad/binding") == []
    finally:
        loop.cancel()
        await asyncio.wait([loop])
        await scheduler.close()


async def test_a_pod_that_keeps_failing_has_one_event_whose_series_grows_and_one_condition_patch(
    scheduler: Scheduler, sender: FakeSender
) -> None:
    huge = await failed_huge_pod(scheduler)
    [condition] = [body["status"]["conditions"][0] for body in sender.bodies("/pods/huge/status")]
    # The API server now holds the condition, and the watch says so.
    scheduler.intake.on_event(
        PODS, "MODIFIED", {**huge, "status": {"phase": "Pending", "conditions": [condition]}}
    )
    pod = scheduler.pending["uid-huge"]
    for _ in range(5):
        scheduler.reporter.report_unschedulable(pod, condition["message"], "promsched")
    await settle(scheduler)
    assert len(sender.bodies("/pods/huge/status")) == 1  # nothing changed: no more patches
    created = [r for r in sender.sent if r.method == "POST" and r.path.endswith("/events")]
    assert len(created) == 1
    assert created[0].path == "/apis/events.k8s.io/v1/namespaces/ns/events"
    assert series_counts(sender) == [2]
    scheduler.reporter.refresh_events()
    await settle(scheduler)
    assert series_counts(sender) == [2, 6]


async def test_a_changed_failure_message_patches_the_condition_and_keeps_its_transition_time(
    scheduler: Scheduler, sender: FakeSender
) -> None:
    stored = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "old"}
    huge = pod_object("huge", cpu="64")
    scheduler.intake.on_event(
        PODS, "ADDED", {**huge, "status": {"conditions": [{**stored, "lastTransitionTime": "T0"}]}}
    )
    await cycle(scheduler)
    [patch] = sender.bodies("/pods/huge/status")
    assert patch["status"]["conditions"][0][
        "message"
    ] == "0/3 nodes are available: 3 Insufficient cpu." + no_victims(3)
    assert patch["status"]["conditions"][0]["lastTransitionTime"] == "T0"


async def test_a_failed_scheduling_event_dropped_by_a_full_queue_is_created_at_the_next_failure(
    scheduler: Scheduler, sender: FakeSender
) -> None:
    scheduler.reporter.writes.limit = 0  # full: every write is dropped
    huge = pod_object("huge", cpu="64")
    scheduler.intake.on_event(PODS, "ADDED", huge)
    pod = scheduler.pending["uid-huge"]
    scheduler.reporter.report_unschedulable(pod, "0/3 nodes are available: 3 Insufficient cpu.", "promsched")
    scheduler.reporter.writes.limit = 100
    scheduler.reporter.report_unschedulable(pod, "0/3 nodes are available: 3 Insufficient cpu.", "promsched")
    await settle(scheduler)
    assert [r.method for r in sender.sent if "/events" in r.path] == ["POST"]


async def test_the_decision_records_the_pods_usage_estimate(scheduler: Scheduler, sender: FakeSender) -> None:
    counted = {"policy": "p", "resource": "cpu", "source": "request"}
    before = REGISTRY.get_sample_value("promsched_pod_estimates_total", counted) or 0.0
    scheduler.intake.on_event(PODS, "ADDED", pod_object("web"))  # requests 100m and 64Mi
    await cycle(scheduler)
    await scheduler.flush_statuses()
    [status] = sender.bodies("/schedulingpolicies/p/status")
    assert status["status"]["lastDecision"]["estimate"] == {
        "milliCpu": 100,
        "memory": 64 * 1024**2,
        "cpuBasis": "1 x request 100m",
        "memoryBasis": "1 x request 64Mi",
    }
    [binding] = sender.bodies("/pods/web/binding")
    annotation = json.loads(binding["metadata"]["annotations"]["promsched.io/decision"])
    assert annotation["est"] == {
        "cpu": [100, "1 x request 100m"],
        "memory": [64 * 1024**2, "1 x request 64Mi"],
    }
    assert REGISTRY.get_sample_value("promsched_pod_estimates_total", counted) == before + 1


@pytest.mark.parametrize("chosen", ["n0", "n2", "n4", None])
def test_a_decisions_record_keeps_only_the_nodes_it_shows(chosen: str | None) -> None:
    # Equal totals: the node chosen at random may rank past the first three.
    ranked = tuple(NodeResult(f"n{index}", 50.0, (), ()) for index in range(5))
    outcome = Outcome(chosen, ranked, {}, 5)
    kept = shown(outcome)
    assert len(kept) == TOP_NODES
    chosen_first = [r for r in ranked if r.node == chosen] + [r for r in ranked if r.node != chosen]
    assert kept == tuple(chosen_first[:TOP_NODES])


async def test_closing_writes_the_event_counts_the_api_server_lacks(
    scheduler: Scheduler, sender: FakeSender
) -> None:
    await failed_huge_pod(scheduler)
    pod = scheduler.pending["uid-huge"]
    for _ in range(3):
        scheduler.reporter.report_unschedulable(
            pod, "0/3 nodes are available: 3 Insufficient cpu.", "promsched"
        )
    await scheduler.close()
    assert series_counts(sender) == [4]  # the patch of count 2 still waited: the newer count replaced it
