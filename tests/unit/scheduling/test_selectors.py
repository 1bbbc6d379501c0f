"""Label selectors with apimachinery's semantics, and the cache's indexes that find what they select."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.objects.fields import FieldError
from promsched.scheduling.objects.selectors import parse_label_selector
from support.objects import node, pod
from support.placement import anti_affinity, cache_with, required_term


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        (None, {}, False),  # null selects nothing
        ({}, {"any": "thing"}, True),  # empty selects everything
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, {}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, {"app": "db"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": ""}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": ""}, False),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "v", "operator": "In", "values": ["1", "2"]}],
            },
            {"app": "web", "v": "2"},
            True,
        ),
    ],
)
def test_selectors_match_as_apimachinery_does(selector: Any, labels: dict[str, str], matches: bool) -> None:
    assert parse_label_selector(selector, "s").matches(labels) is matches


@pytest.mark.parametrize(
    "expression",
    [
        {"key": "app", "operator": "In", "values": []},
        {"key": "app", "operator": "Exists", "values": ["x"]},
        {"key": "", "operator": "Exists"},
        {"key": "app", "operator": "Gt", "values": ["1"]},
    ],
)
def test_malformed_expressions_name_their_field(expression: dict[str, Any]) -> None:
    with pytest.raises(FieldError, match=r"^s\.matchExpressions\[0\]\."):
        parse_label_selector({"matchExpressions": [expression]}, "s")


def test_the_cache_finds_selected_pods_through_its_label_index_and_keeps_it_current() -> None:
    web, db = {"app": "web", "tier": "front"}, {"app": "db"}
    cache = cache_with(
        [node("n1"), node("n2")],
        [pod("w1", labels=web, node_name="n1"), pod("d1", labels=db, node_name="n2")],
    )
    selector = parse_label_selector({"matchLabels": {"app": "web"}}, "s")
    by_expression = parse_label_selector(
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, "s"
    )
    assert [(n, p.name) for n, p in cache.pods_selected_by(selector)] == [("n1", "w1")]
    assert [p.name for _, p in cache.pods_selected_by(by_expression)] == ["w1"]
    # A relabelled pod moves in the index; a deleted one leaves it without a trace.
    cache.observe_pod(pod("d1", labels={"app": "web"}, node_name="n2"))
    assert sorted(p.name for _, p in cache.pods_selected_by(selector)) == ["d1", "w1"]
    cache.remove_pod("uid-w1")
    cache.remove_pod("uid-d1")
    assert cache.label_index == {}
    assert cache.node_pods == {}


def test_the_cache_files_repelling_pods_under_the_labels_their_terms_need() -> None:
    keyed = pod("a", node_name="n1", affinity=anti_affinity(required_term({"app": "web"})))
    open_term = {
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        "topologyKey": "z",
    }
    unkeyed = pod("b", node_name="n1", affinity=anti_affinity(open_term))
    cache = cache_with([node("n1")], [keyed, unkeyed])
    assert cache.pods_that_may_repel({"app": "web"}) == {keyed.uid, unkeyed.uid}
    assert cache.pods_that_may_repel({"app": "db"}) == {unkeyed.uid}
    cache.remove_pod(keyed.uid)
    cache.remove_pod(unkeyed.uid)
    assert cache.repelling == {}
