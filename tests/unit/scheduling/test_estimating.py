"""Usage estimates (spec.estimation): siblings' percentile, the fallback rule, and where they count."""

from __future__ import annotations

import time
from typing import Any

import pytest

from promsched.metrics import Snapshot, plan_from_policy
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import decide
from promsched.scheduling.cycle.estimating import Estimates, EstimateSource, percentile
from promsched.scheduling.cycle.memos import DecisionMemo, herd_adjustments
from promsched.scheduling.objects.pods import PodInfo, PodSpecError
from promsched.scheduling.objects.resources import Resources
from support.clocks import Clock
from support.objects import GIB, node, pod_info, pod_object
from support.policies import policy_spec
from support.snapshots import snapshot_of, with_usage

READ_AT = 100_000.0
MIB = 1024**2
SIBLINGS = {"source": "Siblings"}
WEB = "ReplicaSet/web-7d9"


def snapshot(estimation: dict[str, Any] | None = None, cpu_threshold: float | None = None) -> Snapshot:
    cpu: dict[str, Any] = {"name": "cpu", "timeRange": "1m"}
    if cpu_threshold is not None:
        cpu["threshold"] = cpu_threshold
    spec = policy_spec(cpu, {"name": "memory", "timeRange": "0s"}, estimation=estimation or {})
    return snapshot_of(plan_from_policy(spec), {"cpu": {"n1": 10.0}, "memory": {"n1": 10.0}}, READ_AT)


@pytest.fixture
def clock() -> Clock:
    return Clock(READ_AT)


@pytest.fixture
def cache(clock: Clock) -> ClusterCache:
    cache = ClusterCache(clock=clock)
    cache.upsert_node(node("n1"))  # 4 CPUs, 16 GiB
    return cache


def running(
    cache: ClusterCache, name: str, owner: str = WEB, namespace: str = "ns", age: float = 3600
) -> None:
    cache.observe_pod(
        pod_info(
            name,
            namespace,
            node_name="n1",
            phase="Running",
            started_at=READ_AT - age,
            controller=owner,
            requests=Resources(1000, GIB),
        )
    )


def incoming(owner: str = WEB, **fields: Any) -> PodInfo:
    return pod_info("new", controller=owner, **{"requests": Resources(1000, GIB), **fields})


@pytest.mark.parametrize(
    ("rank", "expected"), [(90, 9.0), (50, 5.0), (100, 10.0), (1, 1.0), (10, 1.0), (11, 2.0)]
)
def test_the_percentile_is_the_nearest_rank(rank: int, expected: float) -> None:
    assert percentile([float(value) for value in (7, 3, 10, 1, 5, 2, 9, 4, 8, 6)], rank) == expected


def test_a_single_sibling_is_every_percentile() -> None:
    assert percentile([42.0], 90) == percentile([42.0], 1) == 42.0


def test_a_pod_is_estimated_at_the_percentile_of_its_running_siblings(cache: ClusterCache) -> None:
    for index in range(5):
        running(cache, f"web-{index}")
    running(cache, "other", owner="ReplicaSet/other")  # another controller
    running(cache, "web-0", namespace="elsewhere")  # the same name in another namespace
    cpu = {("ns", f"web-{index}"): 0.1 * (index + 1) for index in range(5)}
    cpu |= {("ns", "other"): 3.0, ("elsewhere", "web-0"): 3.0, ("ns", "gone"): 3.0}
    memory = {("ns", f"web-{index}"): 100.0 * MIB * (index + 1) for index in range(4)}
    estimates = Estimates(with_usage(snapshot(SIBLINGS), cpu, memory), cache)

    estimate = estimates.of(incoming())

    assert (estimate.cpu.amount, estimate.cpu.source, estimate.cpu.siblings) == (
        500,
        EstimateSource.SIBLINGS,
        5,
    )
    assert (estimate.memory.amount, estimate.memory.siblings) == (400 * MIB, 4)
    record = estimate.to_api()
    assert record.cpu_basis == f"p90 of 5 running siblings ({WEB})"
    assert (record.milli_cpu, record.memory) == (500, 400 * MIB)


def test_a_sibling_younger_than_the_window_counts_at_its_rate_over_its_life(cache: ClusterCache) -> None:
    # rate() over the 5m window divides by the whole window: a pod that ran 1 minute of it at 0.5
    # cores reads 0.1.
    running(cache, "web-young", age=60)
    running(cache, "web-old")
    cpu = {("ns", "web-young"): 0.1, ("ns", "web-old"): 0.2}
    estimates = Estimates(with_usage(snapshot({**SIBLINGS, "window": "5m", "percentile": 100}), cpu), cache)

    estimate = estimates.of(incoming())

    assert (estimate.cpu.amount, estimate.cpu.siblings) == (500, 2)


def test_a_sibling_still_settling_is_left_out_of_the_cpu_percentile(cache: ClusterCache) -> None:
    running(cache, "web-0", age=10)  # a sample or two: its rate says little yet
    usage = {("ns", "web-0"): 0.05}
    estimates = Estimates(with_usage(snapshot(SIBLINGS), usage, {("ns", "web-0"): 100.0 * MIB}), cache)

    estimate = estimates.of(incoming())

    assert (estimate.cpu.amount, estimate.cpu.source) == (1000, EstimateSource.REQUEST)
    assert (estimate.memory.amount, estimate.memory.source) == (100 * MIB, EstimateSource.SIBLINGS)


def test_without_siblings_in_the_metrics_the_rule_holds(cache: ClusterCache) -> None:
    running(cache, "web-0")
    usage = {("ns", "web-0"): 2.0}
    stale = with_usage(snapshot(SIBLINGS), usage, usage, at=READ_AT - 600)  # older than staleAfter
    orphan = incoming(owner="")
    for estimates, pod in [
        (Estimates(with_usage(snapshot(SIBLINGS)), cache), incoming()),  # no series at all
        (Estimates(stale, cache), incoming()),
        (Estimates(with_usage(snapshot(), usage, usage), cache), incoming()),  # source Requests
        (Estimates(with_usage(snapshot(SIBLINGS), usage, usage), cache), orphan),  # no controller
    ]:
        estimate = estimates.of(pod)
        assert (estimate.cpu.amount, estimate.cpu.source) == (1000, EstimateSource.REQUEST)
        assert estimate.memory.amount == GIB


@pytest.mark.parametrize(
    ("fallback", "limits", "expected_cpu", "source", "basis"),
    [
        ({}, Resources(), 1000, EstimateSource.REQUEST, "1 x request 1"),
        ({"cpuFactor": 1.5}, Resources(), 1500, EstimateSource.REQUEST, "1.5 x request 1"),
        ({"useLimits": True}, Resources(2000, 2 * GIB), 2000, EstimateSource.LIMIT, "the pod's limit"),
        ({"useLimits": True}, Resources(), 1000, EstimateSource.REQUEST, "1 x request 1"),
        ({"cpuFactor": 2}, Resources(2000, 2 * GIB), 2000, EstimateSource.REQUEST, "2 x request 1"),
    ],
)
def test_the_rule_is_factor_times_request_or_the_limit(
    cache: ClusterCache,
    fallback: dict[str, Any],
    limits: Resources,
    expected_cpu: int,
    source: EstimateSource,
    basis: str,
) -> None:
    estimates = Estimates(snapshot({"fallback": fallback}), cache)
    estimate = estimates.of(incoming(limits=limits))
    assert (estimate.cpu.amount, estimate.cpu.source) == (expected_cpu, source)
    assert estimate.to_api().cpu_basis == basis


def test_a_pod_without_requests_counts_as_the_unrequested_amounts(cache: ClusterCache) -> None:
    bare = pod_info("bare")
    default = Estimates(snapshot(), cache).of(bare)
    assert (default.cpu.amount, default.memory.amount) == (250, 200 * MIB)
    assert default.cpu.source is EstimateSource.UNREQUESTED
    chosen = Estimates(snapshot({"unrequested": {"cpu": "1", "memory": "1Gi"}}), cache).of(bare)
    assert (chosen.cpu.amount, chosen.memory.amount) == (1000, GIB)


def test_a_pod_state_is_estimated_once_and_a_new_state_anew(cache: ClusterCache) -> None:
    estimates = Estimates(snapshot(), cache)
    first = estimates.of(incoming())
    state = incoming()
    assert estimates.of(state) is estimates.of(state)
    resized = estimates.of(incoming(requests=Resources(2000, GIB)))  # the same uid, a new state
    assert (first.cpu.amount, resized.cpu.amount) == (1000, 2000)


def owned_pod(containers: list[dict[str, Any]], **spec: Any) -> PodInfo:
    document = pod_object("p", containers=containers, **spec)
    document["metadata"]["ownerReferences"] = [
        {"kind": "Deployment", "name": "not-the-controller"},
        {"kind": "ReplicaSet", "name": "web-7d9", "controller": True},
    ]
    return PodInfo.from_object(document)


def limited(cpu: str | None, memory: str | None) -> dict[str, Any]:
    limits = {name: value for name, value in (("cpu", cpu), ("memory", memory)) if value is not None}
    return {"name": "c", "resources": {"limits": limits}}


def test_the_pod_knows_its_controller_and_its_limits() -> None:
    pod = owned_pod([limited("1", "1Gi"), limited("500m", None)])
    assert pod.controller == WEB
    # memory is unbounded: one container sets no memory limit.
    assert (pod.limits.milli_cpu, pod.limits.memory) == (1500, 0)
    pod_level = owned_pod([limited(None, None)], resources={"limits": {"cpu": "2", "memory": "3Gi"}})
    assert (pod_level.limits.milli_cpu, pod_level.limits.memory) == (2000, 3 * GIB)
    with pytest.raises(PodSpecError, match=r"spec.containers\[0\].resources.limits.cpu"):
        owned_pod([limited("lots", None)])


def test_the_herd_adjustment_counts_placed_pods_at_their_estimate(cache: ClusterCache, clock: Clock) -> None:
    for index in range(3):
        running(cache, f"web-{index}")
    usage = {("ns", f"web-{index}"): 2.0 for index in range(3)}  # 2 cores each, twice the request
    clock.now = READ_AT + 1
    cache.assume(incoming(), "n1")

    by_requests = herd_adjustments(cache, DecisionMemo(snapshot()), ["n1"])
    by_siblings = herd_adjustments(cache, DecisionMemo(with_usage(snapshot(SIBLINGS), usage)), ["n1"])

    assert by_requests == {"n1": {"cpu": 25.0, "memory": 6.25}}  # 1 of 4 cores, 1 of 16 GiB
    assert by_siblings == {"n1": {"cpu": 50.0, "memory": 6.25}}  # no memory series: the request


def test_a_node_the_pods_estimate_would_take_past_a_threshold_is_filtered(cache: ClusterCache) -> None:
    cache.upsert_node(node("n2"))
    loads = {"cpu": {"n1": 70.0, "n2": 50.0}, "memory": {"n1": 10.0, "n2": 10.0}}
    spec = policy_spec(
        {"name": "cpu", "timeRange": "1m", "threshold": 80},
        {"name": "memory", "timeRange": "0s"},
        estimation={"fallback": {"cpuFactor": 2}},
    )
    taken = snapshot_of(plan_from_policy(spec), loads, time.time())  # decide() reads it as fresh
    small, large = pod_info("small", requests=Resources(100, GIB)), incoming(owner="")

    fits = decide(small, cache, taken, memo=DecisionMemo(taken))
    assert {result.node for result in fits.ranked} == {"n1", "n2"}  # 70% + 5% stays under 80%
    # 2 x 1 core of 4 is 50%: 70% + 50% is past 80% on n1; n2's 50% + 50% too.
    outcome = decide(large, cache, taken, memo=DecisionMemo(taken))
    assert outcome.node is None
    assert outcome.filtered == {"cpu load above 80%": 2}
    assert "2 cpu load above 80%" in outcome.message


def test_estimates_are_worked_out_once_per_snapshot(cache: ClusterCache) -> None:
    for index in range(3):
        running(cache, f"web-{index}")
    taken = with_usage(snapshot(SIBLINGS), {("ns", f"web-{index}"): 1.0 for index in range(3)})
    memo = DecisionMemo(taken)
    first = memo.estimates_for(cache).of(incoming())
    running(cache, "web-3")  # a sibling more, within the same snapshot: the percentile is kept
    again = memo.estimates_for(cache).of(pod_info("another", controller=WEB))
    assert again.cpu is first.cpu
    assert DecisionMemo(taken).estimates_for(cache) is not memo.estimates_for(cache)
