"""Spread layouts kept across pods count the same domains as a walk over every node would, however the
nodes change between pods."""

from __future__ import annotations

from collections import Counter
from typing import Any

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cluster.spread_layouts import SpreadLayout, SpreadLayouts
from promsched.scheduling.objects.pods import PodInfo
from support.objects import HOSTNAME, ZONE, node, pod
from support.placement import cache_with

WEB = {"app": "web"}


def spreading(*keys: str, **policies: Any) -> PodInfo:
    constraints = [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": WEB},
        }
        | policies
        for key in keys
    ]
    return pod("web", labels=WEB, topologySpreadConstraints=constraints, nodeSelector={"pool": "main"})


def layout(cache: ClusterCache, spread_pod: PodInfo, layouts: SpreadLayouts | None = None) -> SpreadLayout:
    return (layouts or SpreadLayouts()).of(spread_pod, spread_pod.spread_constraints, cache)


def assert_as_walked(kept: SpreadLayout, cache: ClusterCache, spread_pod: PodInfo) -> None:
    walked = layout(cache, spread_pod)
    assert (kept.carrying, kept.domains, kept.sizes) == (walked.carrying, walked.domains, walked.sizes)


def test_a_kept_layout_follows_nodes_relabelled_added_and_deleted() -> None:
    main = {"pool": "main"}
    cache = cache_with(
        [node(f"a{index}", "zone-a", labels=main) for index in range(3)] + [node("b0", "zone-b")]
    )
    spread_pod = spreading(ZONE, HOSTNAME)
    layouts = SpreadLayouts()
    kept = layout(cache, spread_pod, layouts)
    # b0 carries both keys but the pod's nodeSelector leaves it out of the counted domains (policy Honor).
    assert kept.carrying == {"a0", "a1", "a2", "b0"}
    assert kept.sizes[0] == Counter({"zone-a": 3})
    cache.upsert_node(node("a1", "zone-b", labels=main))  # moved to another zone
    cache.upsert_node(node("a2", None, labels=main))  # lost its zone: carries a key no more
    cache.remove_node("a0")
    cache.upsert_node(node("c0", "zone-c", labels=main))
    cache.upsert_node(node("b0", "zone-b", labels=main))  # now selected
    again = layout(cache, spread_pod, layouts)
    assert again is kept
    assert kept.sizes[0] == Counter({"zone-b": 2, "zone-c": 1})
    assert_as_walked(kept, cache, spread_pod)


def test_pods_alike_share_a_layout_and_other_inclusion_inputs_get_their_own() -> None:
    cache = cache_with([node("a0", "zone-a", labels={"pool": "main"}), node("b0", "zone-b")])
    layouts = SpreadLayouts()
    honouring = spreading(ZONE)
    assert layout(cache, spreading(ZONE), layouts) is layout(cache, honouring, layouts)
    ignoring = spreading(ZONE, nodeAffinityPolicy="Ignore")
    assert layout(cache, honouring, layouts).sizes[0] == Counter({"zone-a": 1})
    assert layout(cache, ignoring, layouts).sizes[0] == Counter({"zone-a": 1, "zone-b": 1})


def test_domain_counts_give_every_counted_domain_and_only_counted_nodes_pods() -> None:
    cache = cache_with(
        [node("a0", "zone-a", labels={"pool": "main"}), node("b0", "zone-b", labels={"pool": "main"})]
    )
    kept = layout(cache, spreading(ZONE))
    # Pods on a node the layout does not count (gone, or left out) add nothing.
    assert kept.domain_counts([Counter({"a0": 2, "gone": 5})]) == [{"zone-a": 2, "zone-b": 0}]
