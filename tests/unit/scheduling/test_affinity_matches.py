"""Required affinity's counts per domain, kept across pods (issue 43): after any sequence of pods placed,
relabelled, moved and deleted, and of nodes relabelled, added and removed, they are what counting every
pod afresh gives."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.objects.affinity_terms import AffinityTerm, parse_pod_affinity
from support.objects import HOSTNAME, ZONE, node, pod
from support.placement import affinity, required_term

KEYS = (HOSTNAME, ZONE, "rack")
APPS = ("web", "db")


def terms_of(*terms: dict[str, object]) -> tuple[AffinityTerm, ...]:
    return parse_pod_affinity(affinity(*terms), "ns").required


def counted_afresh(terms: tuple[AffinityTerm, ...], cache: ClusterCache) -> dict[tuple[str, str], int]:
    """For each term, the counted pods on known nodes that match all terms, in the term's domain."""
    counts: Counter[tuple[str, str]] = Counter()
    for node_name, counted in cache.counted.values():
        known = cache.nodes.get(node_name)
        namespace_labels = cache.labels_of_namespace(counted.namespace)
        if known is None or not all(
            term.matches(counted.namespace, counted.labels, namespace_labels) for term in terms
        ):
            continue
        for term in terms:
            value = known.labels.get(term.topology_key)
            if value is not None:
                counts[(term.topology_key, value)] += 1
    return dict(counts)


def random_node(rng: random.Random, name: str) -> object:
    rack = {"rack": f"rack-{rng.randint(0, 2)}"} if rng.random() < 0.7 else {}
    return node(name, rng.choice(("zone-a", "zone-b", None)), labels=rack, version=str(rng.randint(2, 10**6)))


TERM_SETS = [
    terms_of(required_term({"app": "web"}, ZONE)),
    terms_of(required_term({"app": "web"}, HOSTNAME)),
    terms_of(required_term({"app": "web"}, ZONE), required_term({"app": "web"}, "rack")),
    terms_of(
        required_term({"app": "db"}, ZONE, namespaces=["ns", "other"]), required_term({"tier": "a"}, ZONE)
    ),
]


@pytest.mark.parametrize("seed", range(40))
def test_kept_counts_are_counted_afresh_after_any_changes(seed: int) -> None:
    rng = random.Random(seed)
    cache = ClusterCache()
    for index in range(rng.randint(1, 8)):
        cache.upsert_node(random_node(rng, f"n{index}"))
    kept = cache.indexes.affinity_matches
    for step in range(60):
        change = rng.random()
        name = f"p{rng.randint(0, 15)}"
        namespace = rng.choice(("ns", "other"))
        if change < 0.5:  # a pod placed, relabelled or moved (perhaps to a node the cache lacks)
            labels = {"app": rng.choice(APPS), **({"tier": "a"} if rng.random() < 0.5 else {})}
            on = f"n{rng.randint(0, 9)}"
            cache.observe_pod(pod(name, namespace, labels=labels, node_name=on, version=str(step + 2)))
        elif change < 0.7:
            cache.remove_pod(pod(name, namespace).uid)
        elif change < 0.9:  # a node added or relabelled
            cache.upsert_node(random_node(rng, f"n{rng.randint(0, 9)}"))
        else:
            cache.remove_node(f"n{rng.randint(0, 9)}")
        for terms in rng.sample(TERM_SETS, 2):  # some read at each step, others after several
            assert kept.domains(terms, cache) == counted_afresh(terms, cache), (step, terms)


def test_terms_that_select_namespaces_by_their_labels_are_not_kept() -> None:
    cache = ClusterCache()
    cache.upsert_node(node("n1"))
    selecting = required_term({"app": "web"}, ZONE, namespaceSelector={"matchLabels": {"team": "a"}})

    assert cache.indexes.affinity_matches.domains(terms_of(selecting), cache) is None
