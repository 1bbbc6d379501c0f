"""A selector's matching pods per node, kept across pods, count what a fresh count would, however pods
come, go, move, change labels or start terminating between reads."""

from __future__ import annotations

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cluster.matching_pods import MatchingPods
from promsched.scheduling.objects.selectors import LabelSelector, parse_label_selector
from support.objects import node, pod
from support.placement import cache_with

WEB = {"app": "web"}
ONE_LABEL = parse_label_selector({"matchLabels": WEB}, "labelSelector")
TWO_REQUIREMENTS = parse_label_selector(
    {"matchLabels": WEB, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["canary"]}]},
    "labelSelector",
)


def fresh(selector: LabelSelector, cache: ClusterCache) -> dict[str, int]:
    return dict(MatchingPods().per_node(selector, "ns", cache))


def test_kept_counts_follow_pods_counted_uncounted_moved_relabelled_and_terminating() -> None:
    cache = cache_with(
        [node("n1"), node("n2"), node("n3")],
        [
            pod("w1", labels=WEB, node_name="n1"),
            pod("w2", labels=WEB, node_name="n1"),
            pod("w3", labels=WEB, node_name="n2"),
            pod("other-ns", "elsewhere", labels=WEB, node_name="n2"),
            pod("db", labels={"app": "db"}, node_name="n3"),
        ],
    )
    kept = MatchingPods()
    for selector in (ONE_LABEL, TWO_REQUIREMENTS):
        assert dict(kept.per_node(selector, "ns", cache)) == {"n1": 2, "n2": 1}
    cache.assume(pod("w4", labels=WEB), "n3")
    cache.observe_pod(pod("w1", labels={**WEB, "tier": "canary"}, node_name="n1"))  # relabelled
    cache.observe_pod(pod("w3", labels=WEB, node_name="n2", deleting=True))  # terminating
    cache.observe_pod(pod("db", labels=WEB, node_name="n3"))  # now a web pod
    cache.remove_pod(pod("w2").uid)
    assert dict(kept.per_node(ONE_LABEL, "ns", cache)) == fresh(ONE_LABEL, cache) == {"n1": 1, "n3": 2}
    assert dict(kept.per_node(TWO_REQUIREMENTS, "ns", cache)) == fresh(TWO_REQUIREMENTS, cache) == {"n3": 2}
