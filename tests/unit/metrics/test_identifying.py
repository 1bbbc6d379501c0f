"""Mapping series to nodes: an instance's nodename, a label with a port, or an address; reports, never
merges."""

from __future__ import annotations

import math

import pytest

from promsched.api.policies import NodeIdentitySource
from promsched.metrics import NodeDirectory, NodeIdentity, QueryResult, Series
from promsched.metrics.identifying import EXAMPLES_KEPT, UNAME_QUERY, Hostnames, assign_nodes, strip_port

UNAME = NodeIdentity(NodeIdentitySource.UNAME_NODENAME)
BY_INSTANCE = NodeIdentity(NodeIdentitySource.LABEL, "instance")
BY_ADDRESS = NodeIdentity(NodeIdentitySource.INTERNAL_IP, "instance")


def result(*items: tuple[dict[str, str], float]) -> QueryResult:
    return QueryResult(query="q", series=tuple(Series(labels, value, 100.0) for labels, value in items))


@pytest.mark.parametrize(
    ("address", "host"),
    [
        ("node-0:9100", "node-0"),
        ("node-0", "node-0"),
        ("10.0.0.7:9100", "10.0.0.7"),
        ("[::1]:9100", "::1"),
        ("[fd00::7]", "fd00::7"),
        ("fd00::7", "fd00::7"),  # a bare IPv6 address has no port to strip
        ("::1", "::1"),
        ("host:metrics", "host:metrics"),
        ("node.example.com:443", "node.example.com"),
    ],
)
def test_strip_port(address: str, host: str) -> None:
    assert strip_port(address) == host


def uname(*pairs: tuple[str, str]) -> QueryResult:
    """node_uname_info as UNAME_QUERY gives it: (instance, nodename) pairs."""
    return result(*(({"instance": instance, "nodename": nodename}, 1.0) for instance, nodename in pairs))


def test_uname_identity_reads_the_nodename_of_each_instance() -> None:
    directory = NodeDirectory.of(["node-0", "node-1"]).with_hostnames(
        uname(("10.0.0.1:9100", "node-0"), ("x", "node-1"))
    )
    assignment = assign_nodes(
        result(({"instance": "10.0.0.1:9100"}, 1), ({"instance": "x"}, 2)), UNAME, directory
    )
    assert {node: series.value for node, series in assignment.by_node.items()} == {"node-0": 1, "node-1": 2}
    assert assignment.report.clean


def test_plugin_queries_keep_instance_and_node_uname_info_is_asked_once() -> None:
    assert UNAME.node_label == "instance"
    assert UNAME.uses_hostnames
    assert not BY_INSTANCE.uses_hostnames
    assert UNAME_QUERY == "max by (instance, nodename) (node_uname_info)"


def test_an_instance_without_a_single_nodename_is_reported_not_guessed() -> None:
    # 10.0.0.2 reports two hostnames (Prometheus's own join refused that match); 10.0.0.3 none.
    directory = NodeDirectory.of(["node-0", "node-2", "node-2b"]).with_hostnames(
        uname(("10.0.0.1:9100", "node-0"), ("10.0.0.2:9100", "node-2"), ("10.0.0.2:9100", "node-2b"))
    )
    assert directory.hostnames == {"10.0.0.1:9100": "node-0"}
    assignment = assign_nodes(
        result(
            ({"instance": "10.0.0.1:9100"}, 1),
            ({"instance": "10.0.0.2:9100"}, 2),
            ({"instance": "10.0.0.3:9100"}, 3),
        ),
        UNAME,
        directory,
    )
    assert list(assignment.by_node) == ["node-0"]
    assert assignment.report.unmatched == (
        'instance="10.0.0.2:9100" (no single nodename in node_uname_info)',
        'instance="10.0.0.3:9100" (no single nodename in node_uname_info)',
    )


def test_kept_hostnames_cover_the_instances_node_uname_info_named() -> None:
    # 10.0.0.2 was named with two nodenames: asking again would not map it either.
    directory = NodeDirectory.of(["node-0", "node-2", "node-2b"]).with_hostnames(
        uname(("10.0.0.1:9100", "node-0"), ("10.0.0.2:9100", "node-2"), ("10.0.0.2:9100", "node-2b"))
    )
    kept = Hostnames(directory, asked_at=100.0)
    named = result(({"instance": "10.0.0.1:9100"}, 1), ({"instance": "10.0.0.2:9100"}, 2), ({"job": "x"}, 3))
    assert kept.cover(named)
    new_exporter = QueryResult("q", (), non_finite=(Series({"instance": "10.0.0.3:9100"}, math.nan, 100.0),))
    assert not kept.cover(new_exporter)


def test_label_identity_strips_ports() -> None:
    directory = NodeDirectory.of(["node-0", "::1"])
    assignment = assign_nodes(
        result(({"instance": "node-0:9100"}, 1), ({"instance": "[::1]:9100"}, 2)), BY_INSTANCE, directory
    )
    assert sorted(assignment.by_node) == ["::1", "node-0"]


def test_internal_ip_identity_maps_addresses_in_any_spelling() -> None:
    directory = NodeDirectory.of(["node-0", "node-1"], {"10.0.0.1": "node-0", "fd00:0:0::2": "node-1"})
    assignment = assign_nodes(
        result(
            ({"instance": "10.0.0.1:9100"}, 1),
            ({"instance": "[fd00::2]:9100"}, 2),
            ({"instance": "10.9.9.9"}, 3),
        ),
        BY_ADDRESS,
        directory,
    )
    assert {node: series.value for node, series in assignment.by_node.items()} == {"node-0": 1, "node-1": 2}
    assert assignment.report.unmatched == ('instance="10.9.9.9"',)


def test_unknown_nodes_and_missing_labels_are_reported() -> None:
    directory = NodeDirectory.of(["node-0"]).with_hostnames(uname(("a", "node-0"), ("b", "ghost")))
    assignment = assign_nodes(
        result(({"instance": "a"}, 1), ({"instance": "b"}, 2), ({"job": "x"}, 3)), UNAME, directory
    )
    assert list(assignment.by_node) == ["node-0"]
    assert assignment.report.unmatched == ('nodename="ghost"', 'no instance label: {job="x"}')
    assert assignment.report.unmatched_count == 2


def test_two_series_for_one_node_are_reported_not_merged() -> None:
    directory = NodeDirectory.of(["node-0", "node-1"])
    assignment = assign_nodes(
        result(
            ({"instance": "node-0:9100"}, 1),
            ({"instance": "node-0:9101"}, 2),
            ({"instance": "node-1:9100"}, 3),
        ),
        BY_INSTANCE,
        directory,
    )
    assert list(assignment.by_node) == ["node-1"]
    assert assignment.report.duplicate_nodes == ("node-0",)
    assert not assignment.report.clean


def test_non_finite_values_are_reported() -> None:
    query_result = QueryResult(
        query="q", series=(), non_finite=(Series({"instance": "a"}, float("nan"), 1.0),)
    )
    directory = NodeDirectory.of(["node-0"]).with_hostnames(uname(("a", "node-0")))
    assignment = assign_nodes(query_result, UNAME, directory)
    assert assignment.by_node == {}
    assert assignment.report.non_finite == ('nodename="node-0" = nan',)


def test_report_examples_are_capped_but_counted() -> None:
    many = result(*(({"instance": f"ghost-{i}"}, 1.0) for i in range(50)))
    report = assign_nodes(many, UNAME, NodeDirectory.of([])).report
    assert len(report.unmatched) == EXAMPLES_KEPT
    assert report.unmatched_count == 50


@pytest.mark.parametrize("identity", [UNAME, BY_INSTANCE], ids=["UnameNodename", "Label"])
def test_host_names_match_their_lowercased_nodes(identity: NodeIdentity) -> None:
    # The kubelet registers host Worker-01 as node worker-01.
    directory = NodeDirectory.of(["worker-01", "worker-02"]).with_hostnames(
        uname(("Worker-01:9100", "Worker-01"), ("WORKER-02:9100", "WORKER-02"))
    )
    assignment = assign_nodes(
        result(({"instance": "Worker-01:9100"}, 1), ({"instance": "WORKER-02:9100"}, 2)), identity, directory
    )
    assert {node: series.value for node, series in assignment.by_node.items()} == {
        "worker-01": 1,
        "worker-02": 2,
    }
    assert assignment.report.clean


def test_two_spellings_of_one_host_are_one_node_twice() -> None:
    directory = NodeDirectory.of(["worker-01"]).with_hostnames(uname(("a", "Worker-01"), ("b", "worker-01")))
    assignment = assign_nodes(result(({"instance": "a"}, 1), ({"instance": "b"}, 2)), UNAME, directory)
    assert assignment.by_node == {}
    assert assignment.report.duplicate_nodes == ("worker-01",)
