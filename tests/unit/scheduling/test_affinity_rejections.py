"""Required inter-pod affinity tells which nodes it rejects through the domains of its counts, not by a
visit to each node (issue 43): on many random clusters its rejections are exactly the nodes its check
rejects, each with the check's status, and a decision is the one the node walk gives."""

from __future__ import annotations

import random
from typing import Any

import pytest

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.filters.interpod_affinity import (
    AFFINITY,
    InterPodAffinity,
    InterPodAffinityCheck,
)
from promsched.scheduling.objects.pods import PodInfo
from support.objects import HOSTNAME, ZONE, node, pod
from support.placement import affinity, cache_with, decide_evenly, required_term

RACK = "rack"
KEYS = (HOSTNAME, ZONE, RACK)
APPS = ("web", "db", "cache")


def random_labels(rng: random.Random) -> dict[str, str]:
    return {
        "app": rng.choice(APPS),
        **({"tier": rng.choice(("front", "back"))} if rng.random() < 0.5 else {}),
    }


def random_term(rng: random.Random) -> dict[str, Any]:
    selected = {"app": rng.choice(APPS)}
    if rng.random() < 0.3:
        selected["tier"] = rng.choice(("front", "back"))
    namespaces: dict[str, Any] = {}
    if rng.random() < 0.2:
        namespaces = {"namespaces": ["ns", "other"]}
    elif rng.random() < 0.2:
        namespaces = {"namespaceSelector": {"matchLabels": {"team": "a"}}}
    return required_term(selected, rng.choice(KEYS), **namespaces)


def random_rules(rng: random.Random) -> dict[str, Any]:
    rules: dict[str, Any] = {}
    terms = [random_term(rng) for _ in range(rng.choice((0, 1, 1, 2)))]
    if terms:
        rules |= affinity(*terms)
    if rng.random() < 0.4:
        anti = [random_term(rng) for _ in range(rng.choice((1, 2)))]
        rules["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    return rules


def random_cluster(rng: random.Random) -> ClusterCache:
    """Nodes lacking a zone or a rack here and there; pods of a few apps in two namespaces, some with
    rules of their own, some on nodes the cache does not know."""
    nodes = []
    for index in range(rng.randint(1, 24)):
        zone = rng.choice(("zone-a", "zone-b", "zone-c", None))
        rack = {RACK: f"rack-{rng.randint(0, 3)}"} if rng.random() < 0.7 else {}
        nodes.append(node(f"n{index}", zone, labels=rack))
    pods = []
    for index in range(rng.randint(0, 30)):
        on = f"n{rng.randint(0, len(nodes) + 1)}"
        namespace = rng.choice(("ns", "ns", "other"))
        rules = random_rules(rng) if rng.random() < 0.3 else {}
        pods.append(pod(f"p{index}", namespace, labels=random_labels(rng), node_name=on, affinity=rules))
    return cache_with(nodes, pods, namespaces={"ns": {"team": "a"}, "other": {"team": rng.choice("ab")}})


def incoming(rng: random.Random) -> PodInfo:
    return pod("incoming", labels=random_labels(rng), affinity=random_rules(rng))


def walked(check: InterPodAffinityCheck, cache: ClusterCache) -> dict[str, Any]:
    """The node walk's answers: each node checked."""
    return {name: status for name, node_info in cache.nodes.items() if (status := check.check(node_info))}


@pytest.mark.parametrize("seed", range(300))
def test_rejections_are_the_nodes_the_check_rejects(seed: int) -> None:
    rng = random.Random(seed)
    cache = random_cluster(rng)
    check = InterPodAffinity().prepare(incoming(rng), cache)
    if check is None:
        return

    assert check.rejections(cache) == walked(check, cache)


@pytest.mark.parametrize("seed", range(300))
def test_counts_are_those_of_every_pod_counted_afresh(seed: int) -> None:
    rng = random.Random(seed)
    cache = random_cluster(rng)
    pod_info = incoming(rng)
    check = InterPodAffinity().prepare(pod_info, cache)
    if check is None:
        return
    afresh = InterPodAffinityCheck(pod_info, cache)
    for node_name, counted in cache.counted.values():
        if (known := cache.nodes.get(node_name)) is not None:
            afresh.add_pod(counted, known)

    assert check.affinity_counts == afresh.affinity_counts
    assert check.anti_counts == afresh.anti_counts
    assert check.existing_anti_counts == afresh.existing_anti_counts


@pytest.mark.parametrize("seed", range(60))
def test_a_decision_is_the_node_walks(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    cache = random_cluster(rng)
    pod_info = incoming(rng)

    found = decide_evenly(pod_info, cache)
    monkeypatch.setattr(InterPodAffinityCheck, "rejections", lambda _check, _cache: None)
    walking = decide_evenly(pod_info, cache)

    assert (found.node, found.filtered, found.message) == (walking.node, walking.filtered, walking.message)
    assert [result.node for result in found.ranked] == [result.node for result in walking.ranked]


def test_affinity_rejects_the_nodes_of_every_domain_holding_no_match_without_checking_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nodes = [node(f"n{index}", ("zone-a", "zone-b", "zone-c")[index % 3]) for index in range(9)]
    cache = cache_with(nodes, [pod("web", labels={"app": "web"}, node_name="n1")])
    check = InterPodAffinity().prepare(
        pod("p", affinity=affinity(required_term({"app": "web"}, ZONE))), cache
    )
    assert check is not None
    checked: list[str] = []
    original = InterPodAffinityCheck.check
    monkeypatch.setattr(
        InterPodAffinityCheck, "check", lambda self, node: checked.append(node.name) or original(self, node)
    )

    rejected = check.rejections(cache)

    assert sorted(rejected) == ["n0", "n2", "n3", "n5", "n6", "n8"]
    assert {status.reason for status in rejected.values()} == {AFFINITY}
    assert checked == []
