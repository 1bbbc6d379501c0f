"""What parsed pods share with one another: maps of strings, empty sets, interned names."""

from __future__ import annotations

import json

import pytest

from promsched.scheduling.objects.pods import PodInfo
from support.objects import pod, pod_object

CREATED = "2026-01-01T00:00:00Z"


def test_pods_with_the_same_labels_share_one_read_only_map_that_equals_them() -> None:
    labels = {"app": "web", "pod-template-hash": "5d8"}
    first = pod("a", labels=labels, nodeSelector={"disk": "ssd"})
    second = pod("b", labels=dict(labels), nodeSelector={"disk": "ssd"})
    assert first.labels is second.labels
    assert first.node_selector is second.node_selector
    assert first.labels == labels
    assert first.node_selector == {"disk": "ssd"}
    with pytest.raises(TypeError):
        first.labels["app"] = "db"  # type: ignore[index]
    assert pod("c", labels={"app": "db"}).labels == {"app": "db"}
    assert first.labels == labels  # another pod's labels are not this one's


def test_pods_without_labels_or_host_ports_share_empty_ones() -> None:
    first, second = pod("a"), pod("b")
    assert first.labels == {} == first.node_selector
    assert first.labels is second.labels
    assert first.host_ports == frozenset()
    assert first.host_ports is second.host_ports


def test_a_pods_names_parsed_from_two_events_are_one_string_each() -> None:
    # Each decoded watch event brings its own copies: the pods parsed keep one, equal, string.
    first, second = (
        PodInfo.from_object(json.loads(json.dumps(pod_object("a", created=CREATED)))) for _ in "12"
    )
    for name in ("uid", "name", "key", "creation_timestamp"):
        assert getattr(first, name) is getattr(second, name)
    assert (first.uid, first.name, first.key, first.creation_timestamp) == ("uid-a", "a", "ns/a", CREATED)
