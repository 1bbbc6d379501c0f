"""Rebalance cycles without a cluster: the sustained values from a fake Prometheus, evictions and
Events recorded by fakes, the plan's outcome in the policy's status."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from promsched.api.policies import SchedulingPolicy
from promsched.api.rebalances import RebalanceMode
from promsched.metrics import PrometheusClient, plan_from_policy
from promsched.metrics.identifying import UNAME_QUERY, Hostnames
from promsched.metrics.samples import QueryResult, Series
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.selectors import parse_label_selector
from promsched.scheduling.policies.recording import PolicyStatus
from promsched.scheduling.policies.runtimes import PolicyRuntime
from promsched.scheduling.rebalance.shares import movable
from support.fake_prometheus import FakePrometheus
from support.objects import node_object, pod, pod_info
from support.policies import policy_object, spec_document
from support.polling import eventually_async
from support.rebalancing import (
    LOADS,
    THRESHOLD,
    Harness,
    StillRefresher,
    answer_cycles,
    hot_and_cool,
    policy,
    workload,
)
from support.snapshots import snapshot_of


@pytest.fixture
def cache() -> ClusterCache:
    # 400m and 800m of 4 cores: 10 and 20 points of cpu.
    return hot_and_cool(workload("small", 400), workload("big", 800))


@pytest.fixture
def sustained(prometheus: FakePrometheus) -> dict[str, float]:
    values = {"hot": 92.0, "cool": 20.0}
    answer_cycles(prometheus, values, {})
    return values


@pytest.fixture
async def client(prometheus: FakePrometheus) -> AsyncIterator[PrometheusClient]:
    async with PrometheusClient(prometheus.endpoint()) as client:
        yield client


async def test_enforce_evicts_the_largest_pod_and_says_why(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    harness = Harness(cache, client)
    runtime = harness.runtime(policy(), LOADS)
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    # 95 - 20 (big) = 75 > 70, - 10 (small) = 65.
    assert harness.evictions() == [
        "/api/v1/namespaces/ns/pods/big/eviction",
    ]
    assert [move.pod.name for move in plan.moves] == ["big"]
    reason = (
        "hot cpu 92% for 5m > 85%; its share: cpu 20% (estimate: 1 x request 800m); "
        "expected destination cool at cpu 40%"
    )
    assert harness.announced == [("ns/big", f"Evicted by promsched: {reason}", "promsched")]
    status = runtime.status.to_status()["rebalance"]
    assert status["mode"] == "Enforce"
    assert status["hotNodeCount"] == 1
    assert status["moves"] == [{"pod": "ns/big", "node": "hot", "destination": "cool", "reason": reason}]
    assert status["evictions"] == 1
    # maxEvictionsPerNode 1 stopped the second move.
    assert [blocked["reason"].rsplit("; ", 1)[1] for blocked in status["blocked"]] == [
        "maxEvictionsPerNode reached this cycle"
    ]


async def test_node_uname_info_is_asked_once_a_cycle_for_every_threshold(
    cache: ClusterCache, client: PrometheusClient, prometheus: FakePrometheus, sustained: dict[str, float]
) -> None:
    memory = {"plugin": "memory", "hotThreshold": 85, "targetThreshold": 70}
    rebalance = {"mode": "DryRun", "thresholds": [THRESHOLD, memory]}
    document = spec_document({"name": "cpu"}, {"name": "memory"}, rebalance=rebalance)
    two = SchedulingPolicy.from_object(policy_object("p", document))
    harness = Harness(cache, client)
    runtime = PolicyRuntime("p", "", PolicyStatus(history=10), policy=two)
    snapshot = snapshot_of(plan_from_policy(two.spec), {"cpu": LOADS, "memory": LOADS}, at=time.time())
    runtime.refresher = StillRefresher(snapshot, client)  # type: ignore[assignment]

    assert await harness.rebalancer.cycle(runtime) is not None
    queries = prometheus.queries()
    assert len([query for query in queries if query.startswith("min_over_time((")]) == 2
    assert queries.count(UNAME_QUERY) == 1


def kept_hostnames(cache: ClusterCache, nodes: list[str], asked_at: float) -> Hostnames:
    """node_uname_info's answer as a refresh at `asked_at` kept it: instance `<node>:9100` for `nodes`."""
    uname = QueryResult(
        UNAME_QUERY,
        tuple(Series({"instance": f"{node}:9100", "nodename": node}, 1.0, asked_at) for node in nodes),
    )
    return Hostnames(cache.directory().with_hostnames(uname), asked_at)


async def test_a_cycle_maps_through_the_hostnames_a_refresh_kept(
    cache: ClusterCache, client: PrometheusClient, prometheus: FakePrometheus, sustained: dict[str, float]
) -> None:
    harness = Harness(cache, client)
    runtime = harness.runtime(policy("DryRun"), LOADS)
    refresher = runtime.refresher
    assert refresher is not None
    refresher.latest = dataclasses.replace(
        refresher.latest, hostnames=kept_hostnames(cache, ["hot", "cool"], time.time() - 10)
    )
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    # Node hot's sustained value came through: only the kept hostnames could have named it.
    assert [move.pod.name for move in plan.moves] == ["big"]
    assert UNAME_QUERY not in prometheus.queries()


@pytest.mark.parametrize(
    ("kept_nodes", "age", "nodes_now"),
    [
        (["hot"], 10, ["hot", "cool"]),  # cool's exporter is new: node_uname_info did not name it
        (["hot", "cool"], 121, ["hot", "cool"]),  # asked longer than staleAfter (2m) ago
        (["hot", "cool"], 10, ["hot", "cool", "new"]),  # a node joined since
    ],
    ids=["an-instance-not-named", "stale", "another-node-set"],
)
async def test_a_cycle_asks_node_uname_info_when_the_kept_hostnames_do_not_serve(
    cache: ClusterCache,
    client: PrometheusClient,
    prometheus: FakePrometheus,
    sustained: dict[str, float],
    kept_nodes: list[str],
    age: float,
    nodes_now: list[str],
) -> None:
    harness = Harness(cache, client)
    runtime = harness.runtime(policy("DryRun", staleAfter="2m"), LOADS)
    refresher = runtime.refresher
    assert refresher is not None
    refresher.latest = dataclasses.replace(
        refresher.latest, hostnames=kept_hostnames(cache, kept_nodes, time.time() - age)
    )
    for node in set(nodes_now) - {"hot", "cool"}:
        cache.upsert_node(NodeInfo.from_object(node_object(node, cpu="4")))
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    assert [move.pod.name for move in plan.moves] == ["big"]
    assert prometheus.queries().count(UNAME_QUERY) == 1


async def test_shares_follow_the_policys_estimate(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    # Estimated at half their requests, big (10 points) and small (5) together cannot bring 95 to 70:
    # both move, as maxEvictionsPerNode allows.
    harness = Harness(cache, client)
    estimation = {"fallback": {"cpuFactor": 0.5}}
    runtime = harness.runtime(
        policy("DryRun", estimation=estimation, rebalance={"limits": {"maxEvictionsPerNode": 2}}), LOADS
    )
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    assert [(move.pod.name, move.reason.rsplit(" ", 1)[1]) for move in plan.moves] == [
        ("big", "30%"),
        ("small", "35%"),
    ]


async def test_dry_run_moves_nothing_and_reports(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    harness = Harness(cache, client)
    runtime = harness.runtime(policy("DryRun"), LOADS)
    await harness.rebalancer.cycle(runtime)
    assert harness.evictions() == []
    assert harness.announced == []
    status = runtime.status.to_status()["rebalance"]
    assert (status["mode"], [move["pod"] for move in status["moves"]], status["evictions"]) == (
        "DryRun",
        ["ns/big"],
        0,
    )


@pytest.mark.parametrize(
    ("options", "spec", "message"),
    [
        (
            {"evictions_allowed": False},
            {},
            "evictions are switched off (--no-rebalance-evictions); ran as DryRun",
        ),
        ({}, {"mode": "Shadow"}, "a Shadow policy never evicts; ran as DryRun"),
    ],
)
async def test_enforce_runs_dry_under_the_kill_switch_and_in_shadow_mode(
    cache: ClusterCache,
    client: PrometheusClient,
    sustained: dict[str, float],
    options: dict[str, Any],
    spec: dict[str, Any],
    message: str,
) -> None:
    harness = Harness(cache, client, **options)
    runtime = harness.runtime(policy(**spec), LOADS)
    await harness.rebalancer.cycle(runtime)
    assert harness.evictions() == []
    status = runtime.status.to_status()["rebalance"]
    assert (status["mode"], status["message"], len(status["moves"])) == ("DryRun", message, 1)


async def test_a_disruption_budget_refusal_is_a_blocked_move(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    harness = Harness(cache, client)
    harness.sender.fail["/eviction"] = 429
    runtime = harness.runtime(policy(), LOADS)
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    assert plan.moves == ()
    assert harness.announced == []
    assert plan.blocked[-1].reason == "eviction refused by a PodDisruptionBudget: refused"
    assert runtime.status.to_status()["rebalance"]["evictions"] == 0


async def test_stale_metrics_move_nothing(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float], prometheus: FakePrometheus
) -> None:
    harness = Harness(cache, client)
    runtime = harness.runtime(policy(), LOADS, at=time.time() - 600)
    assert await harness.rebalancer.cycle(runtime) is None
    assert harness.evictions() == []
    assert prometheus.queries() == []
    message = runtime.status.to_status()["rebalance"]["message"]
    assert message.startswith("metrics not fresh: cpu (refreshed 6")
    assert message.endswith("; nothing moves")


async def test_a_node_that_cooled_inside_the_window_causes_nothing(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    sustained["hot"] = 80.0  # hot now, but not for the whole window
    harness = Harness(cache, client)
    runtime = harness.runtime(policy(), LOADS)
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    assert (plan.hot, plan.moves, harness.evictions()) == ((), (), [])


async def test_no_destination_under_the_target_means_no_eviction(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    harness = Harness(cache, client)
    runtime = harness.runtime(policy(), {"hot": 95.0, "cool": 65.0})
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    assert harness.evictions() == []
    assert {blocked.kind.value for blocked in plan.blocked} == {"DestinationOverTarget"}


async def test_a_controller_that_lost_a_pod_loses_no_other_soon(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    cache.observe_pod(workload("big-2", 800, controller="ReplicaSet/big"))
    harness = Harness(cache, client)
    runtime = harness.runtime(policy(), LOADS)
    await harness.rebalancer.cycle(runtime)
    cache.remove_pod(pod_info("big").uid)
    await harness.rebalancer.cycle(runtime)
    # The second cycle moved `small`, not big's sibling.
    assert harness.evictions() == [
        "/api/v1/namespaces/ns/pods/big/eviction",
        "/api/v1/namespaces/ns/pods/small/eviction",
    ]


async def test_a_node_is_not_relieved_twice_while_its_values_lag_the_move(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    harness = Harness(cache, client)
    # 88 - 20 (big) = 68: one move is enough. The next cycle's values still read 88 (the metrics have
    # not caught up with the move): it counts big as gone and moves nothing more.
    runtime = harness.runtime(policy(), {"hot": 88.0, "cool": 20.0})
    await harness.rebalancer.cycle(runtime)
    cache.remove_pod(pod_info("big").uid)
    second = await harness.rebalancer.cycle(runtime)
    assert harness.evictions() == ["/api/v1/namespaces/ns/pods/big/eviction"]
    assert second is not None
    assert second.moves == ()


async def test_a_destination_counts_pods_placed_there_since_its_values(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    harness = Harness(cache, client)
    runtime = harness.runtime(policy(), LOADS)
    # 2000m just placed on cool: 50 points its values do not show yet, as decide() counts them.
    cache.assume(dataclasses.replace(workload("arrived", 2000), node_name=""), "cool")
    plan = await harness.rebalancer.cycle(runtime)
    assert plan is not None
    assert harness.evictions() == []
    assert {blocked.kind.value for blocked in plan.blocked} == {"DestinationOverTarget"}
    assert "would land on cool at cpu 90%" in plan.blocked[0].reason


def cycles_run(policy_name: str) -> float:
    labels = {"policy": policy_name}
    return REGISTRY.get_sample_value("promsched_rebalance_cycle_duration_seconds_count", labels) or 0.0


async def test_the_loop_runs_due_cycles_only_while_leading_and_times_each(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    harness = Harness(cache, client)
    runtime = harness.runtime(policy("DryRun"), LOADS)
    harness.rebalancer.runtimes.policies[runtime.name] = runtime
    before = cycles_run(runtime.name)
    loop = asyncio.create_task(harness.rebalancer.run())
    try:
        for _ in range(3):  # the loop gets its turns, but is not the leader
            await asyncio.sleep(0)
        assert runtime.status.rebalance is None
        harness.rebalancer.leading.set()
        await eventually_async(lambda: cycles_run(runtime.name) == before + 1, what="a timed cycle")
        assert runtime.status.rebalance is not None
        assert runtime.status.rebalance.hot_node_count == 1
    finally:
        loop.cancel()
    assert cycles_run(runtime.name) == before + 1  # the next is due only after the interval


async def test_a_cycle_is_due_once_per_interval_for_policies_that_rebalance(
    cache: ClusterCache, client: PrometheusClient, sustained: dict[str, float]
) -> None:
    now = [time.time()]
    harness = Harness(cache, client, clock=lambda: now[0])
    runtime = harness.runtime(policy("DryRun", rebalance={"interval": "30s"}), LOADS)
    off = harness.runtime(SchedulingPolicy.from_object(policy_object("q", spec_document())), LOADS)
    assert harness.rebalancer._due(runtime)
    assert not harness.rebalancer._due(off)
    await harness.rebalancer.cycle(runtime)
    now[0] += 29
    assert not harness.rebalancer._due(runtime)
    now[0] += 1
    assert harness.rebalancer._due(runtime)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({}, None),
        ({"controller": ""}, "no controller would recreate it"),
        ({"controller": "DaemonSet/agent"}, "a DaemonSet pod"),
        ({"mirror": True}, "a mirror pod"),
        ({"local_storage": True}, "uses local storage (emptyDir or hostPath)"),
        ({"scheduler_name": "default-scheduler"}, "schedulerName is not promsched"),
        ({"started_at": time.time() - 60}, "younger than minPodAge 10m"),
        ({"deletion_timestamp": True}, "not running"),
    ],
)
def test_which_pods_may_move(changes: dict[str, Any], why: str | None) -> None:
    candidate = dataclasses.replace(workload("w", 100), **changes)
    assert movable(candidate, policy().spec, None, time.time(), {}) == why


def test_moved_controllers_and_selectors_keep_pods() -> None:
    candidate = workload("w", 100)
    spec = policy().spec
    assert movable(candidate, spec, None, time.time(), {"ReplicaSet/w": 1.0}) == (
        "ReplicaSet/w already lost a pod to a move recently"
    )
    selector = parse_label_selector({"matchLabels": {"tier": "batch"}}, "selector")
    assert (
        movable(candidate, spec, selector, time.time(), {}) == "not selected by spec.rebalance.pods.selector"
    )


def test_pods_parse_mirror_and_local_storage() -> None:
    mirror = pod("m", annotations={"kubernetes.io/config.mirror": "abc"})
    local = pod("l", volumes=[{"name": "scratch", "emptyDir": {}}])
    host = pod("h", volumes=[{"name": "logs", "hostPath": {"path": "/var/log"}}])
    plain = pod("p", volumes=[{"name": "cfg", "configMap": {"name": "c"}}])
    assert (mirror.mirror, local.local_storage, host.local_storage) == (True, True, True)
    assert (plain.mirror, plain.local_storage) == (False, False)


def test_off_is_the_default_mode() -> None:
    assert (
        SchedulingPolicy.from_object(policy_object("q", spec_document())).spec.rebalance.mode
        is RebalanceMode.OFF
    )
