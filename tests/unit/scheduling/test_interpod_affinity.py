"""Required inter-pod affinity and anti-affinity with kube-scheduler's semantics and reasons."""

from __future__ import annotations

import re
from typing import Any

import pytest

from promsched.scheduling.filters.interpod_affinity import InterPodAffinity
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo, PodSpecError
from support.objects import ZONE, node, pod, pod_object
from support.placement import affinity, anti_affinity, cache_with, decide_evenly, required_term
from support.preemption import no_victims, not_helpful
from support.statuses import reason_of

ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
AFFINITY = "node(s) didn't match pod affinity rules"
WEB = {"app": "web"}


def three_nodes() -> list[NodeInfo]:
    return [node("n1", "zone-a"), node("n2", "zone-a"), node("n3", "zone-b")]


def test_anti_affinity_on_hostname_keeps_replicas_apart_and_the_fourth_out() -> None:
    cache = cache_with(three_nodes())
    placed = []
    for index in range(4):
        replica = pod(f"web-{index}", labels=WEB, affinity=anti_affinity(required_term(WEB)))
        outcome = decide_evenly(replica, cache)
        if outcome.node is not None:
            cache.assume(replica, outcome.node)
            placed.append(outcome.node)
    assert sorted(placed) == ["n1", "n2", "n3"]
    assert outcome.message == f"0/3 nodes are available: 3 {ANTI}." + no_victims(3)


def test_anti_affinity_on_zone_keeps_the_whole_zone_free() -> None:
    cache = cache_with(three_nodes(), [pod("web-0", labels=WEB, node_name="n1")])
    outcome = decide_evenly(pod("web-1", labels=WEB, affinity=anti_affinity(required_term(WEB, ZONE))), cache)
    assert outcome.node == "n3"
    assert outcome.filtered == {ANTI: 2}


def test_a_node_without_the_topology_key_is_not_kept_free() -> None:
    cache = cache_with([node("bare", zone=None), node("n1")], [pod("web-0", labels=WEB, node_name="n1")])
    outcome = decide_evenly(pod("web-1", affinity=anti_affinity(required_term(WEB, ZONE))), cache)
    assert outcome.node == "bare"


def test_existing_pods_anti_affinity_keeps_the_incoming_pod_out() -> None:
    loner = pod("loner", node_name="n1", affinity=anti_affinity(required_term(WEB, ZONE)))
    cache = cache_with(three_nodes(), [loner])
    outcome = decide_evenly(pod("web", labels=WEB), cache)
    assert outcome.node == "n3"
    assert outcome.filtered == {EXISTING: 2}
    # A pod the term does not select is not kept out.
    assert decide_evenly(pod("db", labels={"app": "db"}), cache).filtered == {}


def test_terms_select_the_owning_pods_namespace_unless_they_name_others() -> None:
    elsewhere = pod("web-0", "other", labels=WEB, node_name="n1")
    cache = cache_with(three_nodes(), [elsewhere])
    assert decide_evenly(pod("web-1", affinity=anti_affinity(required_term(WEB))), cache).filtered == {}
    named = required_term(WEB, namespaces=["other"])
    assert decide_evenly(pod("web-2", affinity=anti_affinity(named)), cache).filtered == {ANTI: 1}


def test_namespace_selectors_match_namespace_labels() -> None:
    cache = cache_with(
        three_nodes(),
        [
            pod("web-0", "team-a", labels=WEB, node_name="n1"),
            pod("web-1", "team-b", labels=WEB, node_name="n2"),
        ],
        namespaces={"team-a": {"team": "a"}, "team-b": {"team": "b"}, "ns": {}},
    )
    by_label = required_term(WEB, namespaceSelector={"matchLabels": {"team": "a"}})
    assert decide_evenly(pod("new", affinity=anti_affinity(by_label)), cache).filtered == {ANTI: 1}
    everywhere = required_term(WEB, namespaceSelector={})
    assert decide_evenly(pod("new", affinity=anti_affinity(everywhere)), cache).filtered == {ANTI: 2}


def test_existing_anti_affinity_judges_the_incoming_pods_namespace_by_its_labels() -> None:
    guard = required_term(WEB, ZONE, namespaceSelector={"matchLabels": {"env": "prod"}})
    cache = cache_with(
        three_nodes(),
        [pod("guard", "ops", node_name="n3", affinity=anti_affinity(guard))],
        namespaces={"prod": {"env": "prod"}, "dev": {"env": "dev"}},
    )
    assert decide_evenly(pod("web", "prod", labels=WEB), cache).filtered == {EXISTING: 1}
    assert decide_evenly(pod("web", "dev", labels=WEB), cache).filtered == {}


def test_affinity_needs_a_matching_pod_in_the_nodes_domain() -> None:
    cache = cache_with(three_nodes(), [pod("db", labels={"app": "db"}, node_name="n3")])
    near_db = affinity(required_term({"app": "db"}, ZONE))
    outcome = decide_evenly(pod("web", affinity=near_db), cache)
    assert outcome.node == "n3"
    assert outcome.filtered == {AFFINITY: 2}


def test_affinity_to_pods_that_do_not_exist_fits_nowhere_unless_the_pod_matches_itself() -> None:
    cache = cache_with([*three_nodes(), node("bare", zone=None)])
    near_db = affinity(required_term({"app": "db"}, ZONE))
    assert decide_evenly(
        pod("web", affinity=near_db), cache
    ).message == f"0/4 nodes are available: 4 {AFFINITY}." + not_helpful(4)
    # The first pod of a group that attracts itself may go anywhere carrying the topology key.
    first = decide_evenly(pod("db-0", labels={"app": "db"}, affinity=near_db), cache)
    assert first.node is not None
    assert first.filtered == {AFFINITY: 1}


def test_a_pod_counts_for_affinity_only_when_it_matches_every_term() -> None:
    terms = affinity(required_term({"app": "db"}, ZONE), required_term({"tier": "cache"}))
    split = cache_with(
        three_nodes(),
        [
            pod("db", labels={"app": "db"}, node_name="n1"),
            pod("cache", labels={"tier": "cache"}, node_name="n1"),
        ],
    )
    assert decide_evenly(pod("web", affinity=terms), split).filtered == {AFFINITY: 3}
    both = cache_with(three_nodes(), [pod("db", labels={"app": "db", "tier": "cache"}, node_name="n1")])
    outcome = decide_evenly(pod("web", affinity=terms), both)
    assert outcome.node == "n1"


def test_pods_on_nodes_the_cache_does_not_know_are_ignored() -> None:
    cache = cache_with(three_nodes(), [pod("web-0", labels=WEB, node_name="gone")])
    assert decide_evenly(pod("web-1", affinity=anti_affinity(required_term(WEB))), cache).filtered == {}


def test_a_pod_without_rules_and_no_repelling_pods_skips_the_filter() -> None:
    cache = cache_with(three_nodes(), [pod("web-0", labels=WEB, node_name="n1")])
    assert InterPodAffinity().prepare(pod("plain", labels=WEB), cache) is None


def test_removing_a_pod_from_the_prepared_counts_lifts_its_anti_affinity() -> None:
    repelling = pod("loner", node_name="n1", affinity=anti_affinity(required_term(WEB)))
    blocking = pod("web-0", labels=WEB, node_name="n1")
    cache = cache_with(three_nodes(), [repelling, blocking])
    check = InterPodAffinity().prepare(
        pod("web-1", labels=WEB, affinity=anti_affinity(required_term(WEB))), cache
    )
    assert check is not None
    n1 = cache.nodes["n1"]
    assert reason_of(check.check(n1)) == ANTI
    check.remove_pod(blocking, n1)
    assert reason_of(check.check(n1)) == EXISTING
    check.remove_pod(repelling, n1)
    assert reason_of(check.check(n1)) is None
    check.add_pod(blocking, n1)
    assert reason_of(check.check(n1)) == ANTI


@pytest.mark.parametrize(
    ("term", "path"),
    [
        ({"labelSelector": {}}, "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
        (
            {"topologyKey": ZONE, "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Has"}]}},
            "requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator",
        ),
    ],
)
def test_malformed_terms_are_refused_naming_the_field(term: dict[str, Any], path: str) -> None:
    with pytest.raises(PodSpecError, match=re.escape(f"spec.affinity.podAntiAffinity.{path}: ")):
        PodInfo.from_object(pod_object("p", affinity=anti_affinity(term)))
