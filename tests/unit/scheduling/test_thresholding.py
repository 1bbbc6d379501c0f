"""The cpu and memory thresholds against an incoming pod's estimate: the room each node has left."""

from __future__ import annotations

import random
import time

import pytest

from promsched.metrics import Snapshot, plan_from_policy
from promsched.metrics.scoring import score_nodes
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import decide
from promsched.scheduling.cycle.memos import DecisionMemo
from promsched.scheduling.objects.resources import Resources
from support.objects import GIB, node, pod, pod_info
from support.policies import policy_spec
from support.snapshots import snapshot_of


def setup(cpu_threshold: float, loads: dict[str, float]) -> tuple[ClusterCache, Snapshot]:
    cache = ClusterCache()
    for name in loads:
        cache.upsert_node(node(name))  # 4 CPUs, 16 GiB
    spec = policy_spec({"name": "cpu", "threshold": cpu_threshold}, {"name": "memory", "threshold": 90})
    memory = dict.fromkeys(loads, 10.0)
    return cache, snapshot_of(plan_from_policy(spec), {"cpu": loads, "memory": memory}, time.time())


def test_the_pods_share_of_each_node_is_held_against_its_room() -> None:
    cache, snapshot = setup(80, {"a": 60.0, "b": 75.0, "big": 70.0})
    cache.upsert_node(node("big", cpu="16"))  # 1 core is 6.25% of it
    memo = DecisionMemo(snapshot)
    incoming = memo.incoming_load(pod_info("p", requests=Resources(1000, GIB)), cache)  # 25% of 4 CPUs
    assert incoming is not None

    results = incoming.filter(score_nodes(snapshot, ["a", "b", "big"], memo=memo.scores))

    assert [result.node for result in results if result.feasible] == ["big"]
    a, b = results[0].reasons[0], results[1].reasons[0]
    assert a.key == b.key == "cpu load above 80%"
    assert a.detail == "a cpu load 85% with the pod's estimated 25%"


def test_rooms_are_kept_per_node_result_and_node() -> None:
    cache, snapshot = setup(80, {"a": 60.0})
    memo = DecisionMemo(snapshot)
    small = memo.incoming_load(pod_info("p", requests=Resources(100, GIB)), cache)
    assert small is not None
    [result] = small.filter(score_nodes(snapshot, ["a"], memo=memo.scores))
    thresholds = memo.thresholds
    assert thresholds is not None
    kept = thresholds.rooms["a"]
    assert kept[0] is result
    assert kept[2] == (0.2 * 4000, 0.8 * 16 * GIB)  # 20% of the CPUs, 80% of the memory
    small.filter(score_nodes(snapshot, ["a"], memo=memo.scores))
    assert thresholds.rooms["a"] is kept  # the same result: worked out once
    cache.upsert_node(node("a", cpu="8", version="2"))  # resized: a room is a share of allocatable
    small.filter(score_nodes(snapshot, ["a"], memo=memo.scores))
    assert thresholds.rooms["a"][2] == (0.2 * 8000, 0.8 * 16 * GIB)


def test_a_threshold_a_load_percent_cannot_pass_leaves_any_pod_room() -> None:
    cache, snapshot = setup(100, {"a": 99.0})
    memo = DecisionMemo(snapshot)
    huge = memo.incoming_load(pod_info("p", requests=Resources(8000, GIB)), cache)
    assert huge is not None
    [result] = huge.filter(score_nodes(snapshot, ["a"], memo=memo.scores))
    assert result.feasible


def test_a_pod_estimated_at_nothing_is_not_held_against_thresholds() -> None:
    cache, with_requests = setup(80, {"a": 60.0})
    spec = policy_spec(
        {"name": "cpu", "threshold": 80}, estimation={"unrequested": {"cpu": "0", "memory": "0"}}
    )
    unrequested = snapshot_of(plan_from_policy(spec), {"cpu": {"a": 60.0}}, time.time())
    assert DecisionMemo(unrequested).incoming_load(pod_info("p"), cache) is None
    # By default such a pod counts as 250m and 200Mi.
    assert DecisionMemo(with_requests).incoming_load(pod_info("p"), cache) is not None


@pytest.mark.parametrize("memory_load", [10.0, 89.0], ids=["memory-room", "memory-crossed"])
def test_a_node_with_no_cpu_allocatable_has_no_room_for_the_pods_estimated_cpu(memory_load: float) -> None:
    """Such a node was taken as unbounded, and crashed the decision once another threshold was crossed
    there (the pod's cpu share was divided by its 0 allocatable)."""
    cache = ClusterCache()
    cache.upsert_node(node("bare", allocatable={"memory": "16Gi", "pods": "110"}))
    cache.upsert_node(node("a"))
    spec = policy_spec({"name": "cpu", "threshold": 80}, {"name": "memory", "threshold": 90})
    loads = {"cpu": {"bare": 10.0, "a": 10.0}, "memory": {"bare": memory_load, "a": 10.0}}
    snapshot = snapshot_of(plan_from_policy(spec), loads, time.time())
    memo = DecisionMemo(snapshot)
    incoming = memo.incoming_load(pod_info("p", requests=Resources(1000, GIB)), cache)
    assert incoming is not None

    bare, a = incoming.filter(score_nodes(snapshot, ["bare", "a"], memo=memo.scores))

    assert a.feasible
    assert bare.reasons == (
        (
            "node(s) had no allocatable cpu for the pod's estimate",
            "bare has no allocatable cpu, and the pod is estimated to use some",
        ),
    )
    # A pod requesting no cpu passes kube's filters there, and goes to the other node.
    for seed in range(5):
        outcome = decide(pod("p", cpu="0"), cache, snapshot, memo=memo, rng=random.Random(seed))
        assert outcome.node == "a"
        assert outcome.filtered == {"node(s) had no allocatable cpu for the pod's estimate": 1}
