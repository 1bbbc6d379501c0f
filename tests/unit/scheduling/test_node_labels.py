"""The nodes-by-label index kept beside the cache holds what a fresh one built from the nodes would."""

from __future__ import annotations

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cluster.node_labels import NodeLabelIndex
from support.objects import ZONE, node
from support.placement import cache_with


def fresh(cache: ClusterCache) -> NodeLabelIndex:
    return NodeLabelIndex().following(cache)


def test_the_index_follows_nodes_relabelled_added_and_deleted() -> None:
    cache = cache_with([node("a0", "zone-a"), node("a1", "zone-a"), node("b0", "zone-b")])
    kept = cache.indexes.node_labels.following(cache)
    assert kept.named(ZONE, "zone-a") == {"a0", "a1"}
    assert kept.lacking(ZONE, cache) == []
    cache.upsert_node(node("a1", "zone-b"))
    cache.upsert_node(node("c0", None))  # no zone
    cache.remove_node("a0")
    assert cache.indexes.node_labels.following(cache) is kept
    assert kept.named(ZONE, "zone-a") == set()
    assert kept.named(ZONE, "zone-b") == {"a1", "b0"}
    assert kept.lacking(ZONE, cache) == ["c0"]
    assert (kept.by_label, kept.carrying, kept.indexed) == (
        fresh(cache).by_label,
        +fresh(cache).carrying,
        fresh(cache).indexed,
    )
