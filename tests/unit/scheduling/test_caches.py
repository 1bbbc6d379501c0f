"""The cluster cache: what counts on a node, assumptions in flight, recent placements."""

from __future__ import annotations

import dataclasses

import pytest

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.objects.nodes import NodeInfo
from support.clocks import Clock
from support.objects import GIB, requesting_pod


def node(name: str = "n1", **changes: object) -> NodeInfo:
    base = NodeInfo.from_object(
        {
            "metadata": {"name": name, "resourceVersion": "1"},
            "status": {
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> Clock:
    return Clock(5000.0)


@pytest.fixture
def cache(clock: Clock) -> ClusterCache:
    cache = ClusterCache(clock=clock)
    cache.upsert_node(node())
    return cache


def test_a_heartbeat_is_not_a_change_but_a_new_label_is(cache: ClusterCache) -> None:
    assert not cache.upsert_node(node(resource_version="2"))
    assert cache.upsert_node(node(resource_version="3", labels={"disk": "ssd"}))


def test_an_assumed_pod_counts_until_bound_and_then_once(cache: ClusterCache) -> None:
    cache.assume(requesting_pod("a"), "n1")
    assert cache.usage_of("n1").requested.milli_cpu == 1000
    # The watch still shows it unbound while the binding is in flight: it stays counted.
    assert not cache.observe_pod(requesting_pod("a"))
    assert cache.usage_of("n1").pods == 1
    cache.observe_pod(requesting_pod("a", node_name="n1"))
    assert cache.usage_of("n1").pods == 1
    assert "uid-a" not in cache.assumed


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
@pytest.mark.parametrize("node_name", ["n1", ""], ids=["bound", "unbound"])
def test_an_assumed_pod_first_seen_finished_frees_its_room(
    cache: ClusterCache, phase: str, node_name: str
) -> None:
    cache.assume(requesting_pod("job"), "n1")
    # Its bind event was missed: the next state the watch shows is already the last.
    assert cache.observe_pod(requesting_pod("job", node_name=node_name, phase=phase))
    assert cache.usage_of("n1").pods == 0
    assert "uid-job" not in cache.assumed
    assert "n1" not in cache.placements


def test_a_failed_binding_forgets_the_pod_and_its_placement(cache: ClusterCache, clock: Clock) -> None:
    cache.assume(requesting_pod("a"), "n1")
    cache.forget("uid-a")
    assert cache.usage_of("n1").pods == 0
    assert list(cache.placements_after("n1", clock.now - 1)) == []


def test_pods_bound_by_others_count_and_deletion_frees(cache: ClusterCache) -> None:
    assert not cache.observe_pod(requesting_pod("other", node_name="n1"))
    assert cache.usage_of("n1").requested.memory == GIB
    assert cache.remove_pod("uid-other")
    assert cache.usage_of("n1").requested.memory == 0
    assert not cache.remove_pod("uid-other")


def test_finished_pods_free_their_node(cache: ClusterCache) -> None:
    cache.observe_pod(requesting_pod("job", node_name="n1"))
    assert cache.observe_pod(requesting_pod("job", node_name="n1", phase="Succeeded"))
    assert cache.usage_of("n1").pods == 0


def test_placements_are_timed_by_assumption_or_start_and_kept_in_order(
    cache: ClusterCache, clock: Clock
) -> None:
    cache.assume(requesting_pod("a"), "n1")
    clock.now += 10
    # Bound by someone else: placed when it started, behind the later assumption.
    cache.observe_pod(requesting_pod("b", node_name="n1", started_at=clock.now - 5))
    cache.observe_pod(requesting_pod("c", node_name="n1"))  # not started yet: placed now
    assert [(p.uid, p.at) for p in cache.placements_after("n1", 0.0)] == [
        ("uid-c", 5010.0),
        ("uid-b", 5005.0),
        ("uid-a", 5000.0),
    ]
    assert [p.uid for p in cache.placements_after("n1", 5004.0)] == ["uid-c", "uid-b"]


def test_pods_running_longer_than_the_placement_memory_are_not_placements(
    cache: ClusterCache, clock: Clock
) -> None:
    cache.observe_pod(
        requesting_pod("old", node_name="n1", started_at=clock.now - cache.placement_memory - 1)
    )
    assert cache.usage_of("n1").pods == 1
    assert "n1" not in cache.placements


def test_the_nodes_whose_placements_changed_since_a_version_come_latest_first(cache: ClusterCache) -> None:
    cache.assume(requesting_pod("a"), "n1")
    since = cache.placement_changes.count
    cache.assume(requesting_pod("b"), "n2")
    cache.assume(requesting_pod("c"), "n1")
    assert list(cache.placement_changes.since(since)) == ["n1", "n2"]
    assert list(cache.placement_changes.since(0)) == ["n1", "n2"]
    assert list(cache.placement_changes.since(cache.placement_changes.count)) == []


def test_placement_versions_change_with_placements(cache: ClusterCache, clock: Clock) -> None:
    cache.assume(requesting_pod("a"), "n1")
    first = cache.placement_changes.latest["n1"]
    cache.assume(requesting_pod("b"), "n1")
    second = cache.placement_changes.latest["n1"]
    cache.forget("uid-b")
    assert len({first, second, cache.placement_changes.latest["n1"]}) == 3
    clock.now += cache.placement_memory + 1
    cache.assume(requesting_pod("c"), "n1")  # the old ones age out as new ones come
    assert [p.uid for p in cache.placements_after("n1", 0.0)] == ["uid-c"]


def test_a_placement_holds_the_pods_latest_state_and_changes_only_if_its_estimate_may(
    cache: ClusterCache,
) -> None:
    assumed = requesting_pod("a")
    cache.assume(assumed, "n1")
    version = cache.placement_changes.latest["n1"]
    bound = requesting_pod("a", node_name="n1", phase="Running")
    cache.observe_pod(bound)
    (placement,) = cache.placements_after("n1", 0.0)
    # The state placed is no longer held: the placement has the counted one, at the time it was placed.
    assert placement.pod is cache.counted["uid-a"][1] is bound
    assert placement.at == 5000.0
    assert cache.placement_changes.latest["n1"] == version  # requests, limits and owner are the same
    resized = requesting_pod("a", node_name="n1", phase="Running", cpu=500)
    cache.observe_pod(resized)
    (placement,) = cache.placements_after("n1", 0.0)
    assert placement.pod is resized
    assert cache.placement_changes.latest["n1"] > version  # a herd adjustment kept for n1 is worked out again
