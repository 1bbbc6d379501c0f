"""Placement preferences scored as kube-scheduler scores them and blended with load by the policy's
weight: preferred node affinity, PreferNoSchedule taints and preferred inter-pod (anti-)affinity."""

from __future__ import annotations

import random
from typing import Any

import pytest

from promsched.api.fields import PolicyError
from promsched.api.policies import parse_spec
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import decide
from promsched.scheduling.framework import Scorer
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.scores import DEFAULT_SCORERS, blend, score_preferences
from promsched.scheduling.scores.interpod_affinity import InterPodAffinityScore
from promsched.scheduling.scores.node_affinity import NodeAffinityScore
from promsched.scheduling.scores.taints import TaintTolerationScore
from promsched.scheduling.scores.topology_spread import PodTopologySpreadScore
from support.objects import ZONE, node, pod
from support.placement import cache_with, decide_evenly, required_term
from support.snapshots import cpu_snapshot

NODES = [node("n1", "zone-a"), node("n2", "zone-b"), node("n3", "zone-c")]
DB = {"app": "db"}


def preferring(*zones_and_weights: tuple[str, int], **options: Any) -> PodInfo:
    terms = [
        {
            "weight": weight,
            "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]},
        }
        for zone, weight in zones_and_weights
    ]
    return pod(
        "app",
        affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}},
        **options,
    )


def preferred_pod_terms(kind: str, *terms: tuple[dict[str, Any], int]) -> dict[str, Any]:
    weighted = [{"weight": weight, "podAffinityTerm": term} for term, weight in terms]
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": weighted}}


def test_preferred_node_affinity_scores_scale_to_the_best_node() -> None:
    result = NodeAffinityScore().score(preferring(("zone-a", 5), ("zone-b", 3)), ClusterCache(), NODES)
    assert result is not None
    assert (result.raw, result.scores) == ([5.0, 3.0, 0.0], [100.0, 60.0, 0.0])


def test_prefer_no_schedule_taints_score_the_untainted_nodes_best() -> None:
    soft = [{"key": "spot", "value": "", "effect": "PreferNoSchedule"}]
    nodes = [
        node("n1", taints=[*soft, {"key": "old", "value": "", "effect": "PreferNoSchedule"}]),
        node("n2", taints=soft),
        node("n3"),
    ]
    result = TaintTolerationScore().score(pod("app"), ClusterCache(), nodes)
    assert (result.raw, result.scores) == ([2.0, 1.0, 0.0], [0.0, 50.0, 100.0])
    tolerant = pod("app", tolerations=[{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}])
    assert TaintTolerationScore().score(tolerant, ClusterCache(), nodes).scores == [0.0, 100.0, 100.0]
    # A NoSchedule toleration does not take the preference away.
    hard_only = pod("app", tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}])
    assert TaintTolerationScore().score(hard_only, ClusterCache(), nodes).scores == [0.0, 50.0, 100.0]


def test_preferred_inter_pod_terms_score_domains_from_lowest_to_highest() -> None:
    cache = cache_with(
        NODES, [pod("db", labels=DB, node_name="n2"), pod("noisy", labels={"app": "noisy"}, node_name="n3")]
    )
    terms = {
        **preferred_pod_terms("podAffinity", (required_term(DB, ZONE), 10)),
        **preferred_pod_terms("podAntiAffinity", (required_term({"app": "noisy"}, ZONE), 4)),
    }
    result = InterPodAffinityScore().score(pod("web", affinity=terms), cache, NODES)
    assert result is not None
    assert (result.raw, result.scores) == ([0.0, 10.0, -4.0], [28.0, 100.0, 0.0])


def test_existing_pods_terms_toward_the_pod_weigh_in_too() -> None:
    follower = pod(
        "cache",
        node_name="n1",
        affinity={
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [required_term(DB, ZONE)]}
        },
    )
    shy = pod(
        "shy", node_name="n3", affinity=preferred_pod_terms("podAntiAffinity", (required_term(DB, ZONE), 7))
    )
    result = InterPodAffinityScore().score(pod("db", labels=DB), cache_with(NODES, [follower, shy]), NODES)
    assert result is not None
    # The follower's required term counts kube's hardPodAffinityWeight, 1.
    assert result.raw == [1.0, 0.0, -7.0]
    assert InterPodAffinityScore().score(pod("other"), cache_with(NODES, [follower, shy]), NODES) is None


def spreading(when: str) -> PodInfo:
    constraint = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": when, "labelSelector": {}}
    return pod("app", topologySpreadConstraints=[constraint])


def test_each_scorer_skips_where_the_pod_gives_it_nothing_to_prefer_and_only_there() -> None:
    soft = [{"key": "spot", "value": "", "effect": "PreferNoSchedule"}]
    tainted = cache_with([node("n1", "zone-a", taints=soft), *NODES[1:]])
    follower = pod(
        "cache",
        node_name="n1",
        affinity={
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [required_term(DB, ZONE)]}
        },
    )
    preferring_db = pod("web", affinity=preferred_pod_terms("podAffinity", (required_term(DB, ZONE), 5)))
    cases: list[tuple[Scorer, PodInfo, ClusterCache, bool]] = [
        (TaintTolerationScore(), pod("app"), cache_with(NODES), True),
        (TaintTolerationScore(), pod("app"), tainted, False),
        (NodeAffinityScore(), pod("app"), cache_with(NODES), True),
        (NodeAffinityScore(), preferring(("zone-a", 1)), cache_with(NODES), False),
        (PodTopologySpreadScore(), spreading("DoNotSchedule"), cache_with(NODES), True),
        (PodTopologySpreadScore(), spreading("ScheduleAnyway"), cache_with(NODES), False),
        (InterPodAffinityScore(), pod("db", labels=DB), cache_with(NODES), True),
        (InterPodAffinityScore(), pod("db", labels=DB), cache_with(NODES, [follower]), False),
        (InterPodAffinityScore(), preferring_db, cache_with(NODES), False),
    ]
    for scorer, incoming, cache, skipped in cases:
        assert scorer.skips(incoming, cache) is skipped, (scorer.name, incoming.name)
        if skipped:
            assert scorer.score(incoming, cache, list(cache.nodes.values())) is None
    # The taint is lifted: the nodes tainted so follow the cache's nodes.
    tainted.upsert_node(node("n1", "zone-a"))
    assert TaintTolerationScore().skips(pod("app"), tainted)


def test_without_preferences_the_load_alone_decides_unchanged() -> None:
    cache = cache_with(NODES)
    snapshot = cpu_snapshot({"n1": 50.0, "n2": 20.0, "n3": 80.0})
    outcome = decide(pod("plain"), cache, snapshot, rng=random.Random(1))
    assert [(r.node, r.total) for r in outcome.ranked] == [("n2", 80.0), ("n1", 50.0), ("n3", 20.0)]
    assert all(len(r.plugins) == 1 for r in outcome.ranked)
    # Preferences that cannot tell the nodes apart (no node in the zone) leave the totals alone too.
    elsewhere = decide(preferring(("zone-x", 10)), cache, snapshot, rng=random.Random(1))
    assert [(r.node, r.total) for r in elsewhere.ranked] == [("n2", 80.0), ("n1", 50.0), ("n3", 20.0)]


def test_preferred_affinity_moves_placement_when_load_is_equal() -> None:
    outcome = decide_evenly(preferring(("zone-c", 50)), cache_with(NODES))
    assert outcome.node == "n3"
    best = outcome.ranked[0]
    assert best.total == pytest.approx(blend(90.0, 100.0, 50))
    assert best.plugins[-1] == ("NodeAffinity", 50.0, 100.0)


@pytest.mark.parametrize(("weight", "chosen"), [(0, "n2"), (20, "n2"), (25, "n3"), (100, "n3")])
def test_the_policy_weight_sets_how_much_preferences_count_against_load(weight: int, chosen: str) -> None:
    # n2 is idle (load score 80, preference 0), n3 busier (50) but preferred (100): their totals,
    # 80 - 80 x weight% and 50 + 50 x weight%, cross at 23%.
    snapshot = cpu_snapshot({"n1": 90.0, "n2": 20.0, "n3": 50.0})
    outcome = decide(preferring(("zone-c", 1)), cache_with(NODES), snapshot, preference_weight=weight)
    assert outcome.node == chosen


def test_preferences_average_with_kubes_plugin_weights() -> None:
    soft = [{"key": "spot", "value": "", "effect": "PreferNoSchedule"}]
    nodes = [node("n1", "zone-a", taints=soft), node("n2", "zone-b")]
    preferences = score_preferences(preferring(("zone-a", 1)), cache_with(nodes), nodes, DEFAULT_SCORERS)
    assert preferences is not None
    # TaintToleration (weight 3) prefers n2, NodeAffinity (weight 2) n1: (3 x 0 + 2 x 100) / 5 = 40.
    assert preferences.totals == [40.0, 60.0]
    assert [part.name for part in preferences.parts(0)] == ["TaintToleration", "NodeAffinity"]


def test_the_policy_field_defaults_to_half_and_is_bounded() -> None:
    base = {"schedulerName": "s", "prometheus": {"url": "http://p:9090"}, "plugins": [{"name": "cpu"}]}
    assert parse_spec(base).placement_preferences.weight == 50
    assert parse_spec({**base, "placementPreferences": {"weight": 0}}).placement_preferences.weight == 0
    with pytest.raises(PolicyError, match=r"spec\.placementPreferences\.weight"):
        parse_spec({**base, "placementPreferences": {"weight": 101}})
