"""Each filter's pass and fail cases with kube-scheduler's reasons, the registry, and the summary text."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.filters import (
    DEFAULT_FILTERS,
    run_filters,
    summarize_failures,
)
from promsched.scheduling.filters.fit import NodeResourcesFit
from promsched.scheduling.filters.node_affinity import NodeAffinity
from promsched.scheduling.filters.node_names import AffinityNodeNames
from promsched.scheduling.filters.ports import NodePorts, conflicts
from promsched.scheduling.filters.readiness import NodeReadiness
from promsched.scheduling.filters.taints import TaintToleration
from promsched.scheduling.filters.unschedulable import NodeUnschedulable
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.pods import HostPort, PodInfo
from support.objects import node, pod
from support.statuses import reason_of

UNSCHEDULABLE = "node(s) were unschedulable"
NOT_READY = "node(s) were not ready"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NAMED_ELSEWHERE = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
PORTS = "node(s) didn't have free ports for the requested pod ports"
IDLE = NodeUsage()


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def containers(*requests: dict[str, str], ports: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return [
        {"name": f"c{index}", "resources": {"requests": r}, "ports": ports or []}
        for index, r in enumerate(requests)
    ]


# --- NodeUnschedulable -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tolerations", "reason"),
    [
        ([], UNSCHEDULABLE),
        ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}], None),
        ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], None),
        ([{"operator": "Exists"}], None),
        (
            [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}],
            UNSCHEDULABLE,
        ),
        ([{"key": "node.kubernetes.io/unschedulable", "value": "true"}], UNSCHEDULABLE),
    ],
)
def test_cordoned_node(tolerations: list[dict[str, str]], reason: str | None) -> None:
    assert (
        reason_of(NodeUnschedulable().filter(pod(tolerations=tolerations), node(unschedulable=True), IDLE))
        == reason
    )


def test_uncordoned_node_passes() -> None:
    assert reason_of(NodeUnschedulable().filter(pod(), node(), IDLE)) is None


# --- TaintToleration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("taints", "tolerations", "reason"),
    [
        ([], [], None),
        ([taint("dedicated", "gpu")], [], "node(s) had untolerated taint {dedicated: gpu}"),
        ([taint("dedicated", "gpu", "NoExecute")], [], "node(s) had untolerated taint {dedicated: gpu}"),
        ([taint("spot")], [], "node(s) had untolerated taint {spot: }"),
        ([taint("dedicated", "gpu", "PreferNoSchedule")], [], None),
        ([taint("dedicated", "gpu")], [{"key": "dedicated", "value": "gpu"}], None),
        (
            [taint("dedicated", "gpu")],
            [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
            None,
        ),
        (
            [taint("dedicated", "gpu")],
            [{"key": "dedicated", "value": "cpu"}],
            "node(s) had untolerated taint {dedicated: gpu}",
        ),
        ([taint("dedicated", "gpu")], [{"key": "dedicated", "operator": "Exists"}], None),
        (
            [taint("dedicated", "gpu", "NoExecute")],
            [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "node(s) had untolerated taint {dedicated: gpu}",
        ),
        ([taint("a", "1"), taint("b", "2", "NoExecute")], [{"operator": "Exists"}], None),
        # the first untolerated taint in the node's order is the one named
        (
            [taint("a", "1"), taint("b", "2")],
            [{"key": "a", "operator": "Exists"}],
            "node(s) had untolerated taint {b: 2}",
        ),
        ([taint("b", "2"), taint("a", "1")], [], "node(s) had untolerated taint {b: 2}"),
        (
            [taint("soft", "1", "PreferNoSchedule"), taint("hard", "2")],
            [],
            "node(s) had untolerated taint {hard: 2}",
        ),
    ],
)
def test_taints(taints: list[dict[str, str]], tolerations: list[dict[str, str]], reason: str | None) -> None:
    assert (
        reason_of(TaintToleration().filter(pod(tolerations=tolerations), node(taints=taints), IDLE)) == reason
    )


# --- NodeReadiness -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ready", "tolerations", "reason"),
    [
        ("True", [], None),
        ("False", [], NOT_READY),
        ("Unknown", [], NOT_READY),
        (None, [], NOT_READY),
        (
            "False",
            [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}],
            None,
        ),
        (
            "False",
            [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
            NOT_READY,
        ),
        ("False", [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}], NOT_READY),
        ("Unknown", [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}], None),
        (None, [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}], None),
        ("Unknown", [{"operator": "Exists"}], None),
    ],
)
def test_readiness(ready: str | None, tolerations: list[dict[str, str]], reason: str | None) -> None:
    assert reason_of(NodeReadiness().filter(pod(tolerations=tolerations), node(ready=ready), IDLE)) == reason


def test_not_ready_taint_gives_kubes_message() -> None:
    tainted = node(ready="False", taints=[taint("node.kubernetes.io/not-ready")])
    assert (
        reason_of(run_filters(pod(), tainted, IDLE))
        == "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    )


# --- NodeAffinity ------------------------------------------------------------------------------------


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def expressions(*requirements: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(requirements)}


LABELS = {"zone": "a", "disk": "ssd", "cores": "16"}


@pytest.mark.parametrize(
    ("node_selector", "matches"),
    [
        ({}, True),
        ({"zone": "a"}, True),
        ({"zone": "a", "disk": "ssd"}, True),
        ({"zone": "b"}, False),
        ({"gpu": "true"}, False),
        ({"zone": "a", "gpu": "true"}, False),
        ({"gpu": ""}, False),  # an empty value still needs the label
    ],
)
def test_node_selector(node_selector: dict[str, str], matches: bool) -> None:
    reason = reason_of(NodeAffinity().filter(pod(nodeSelector=node_selector), node(labels=LABELS), IDLE))
    assert reason == (None if matches else AFFINITY)


@pytest.mark.parametrize(
    ("terms", "matches"),
    [
        ((expressions(expression("zone", "In", "a", "b")),), True),
        ((expressions(expression("zone", "In", "b", "c")),), False),
        ((expressions(expression("zone", "NotIn", "b")),), True),
        ((expressions(expression("zone", "NotIn", "a")),), False),
        ((expressions(expression("gpu", "NotIn", "true")),), True),
        ((expressions(expression("disk", "Exists")),), True),
        ((expressions(expression("gpu", "Exists")),), False),
        ((expressions(expression("gpu", "DoesNotExist")),), True),
        ((expressions(expression("disk", "DoesNotExist")),), False),
        ((expressions(expression("cores", "Gt", "8")),), True),
        ((expressions(expression("cores", "Gt", "16")),), False),
        ((expressions(expression("cores", "Lt", "32")),), True),
        ((expressions(expression("cores", "Lt", "16")),), False),
        ((expressions(expression("zone", "Gt", "1")),), False),  # the label is not an integer
        # requirements in a term are ANDed
        ((expressions(expression("zone", "In", "a"), expression("disk", "In", "hdd")),), False),
        ((expressions(expression("zone", "In", "a"), expression("disk", "In", "ssd")),), True),
        # terms are ORed
        ((expressions(expression("zone", "In", "b")), expressions(expression("disk", "Exists"))), True),
        ((expressions(expression("zone", "In", "b")), expressions(expression("gpu", "Exists"))), False),
        # an empty term selects nothing, and does not make the other terms optional
        (({},), False),
        (({}, expressions(expression("zone", "In", "b"))), False),
        (({}, expressions(expression("zone", "In", "a"))), True),
        # matchFields on the node's name, alone and with labels
        (({"matchFields": [expression("metadata.name", "In", "n1")]},), True),
        (({"matchFields": [expression("metadata.name", "In", "n2")]},), False),
        (({"matchFields": [expression("metadata.name", "NotIn", "n2")]},), True),
        (({"matchFields": [expression("metadata.name", "NotIn", "n1")]},), False),
        (
            (
                {
                    **expressions(expression("zone", "In", "b")),
                    "matchFields": [expression("metadata.name", "In", "n1")],
                },
            ),
            False,
        ),
        (
            (
                {
                    **expressions(expression("zone", "In", "a")),
                    "matchFields": [expression("metadata.name", "In", "n1")],
                },
            ),
            True,
        ),
    ],
)
def test_required_node_affinity(terms: tuple[dict[str, Any], ...], matches: bool) -> None:
    reason = reason_of(NodeAffinity().filter(pod(affinity=required(*terms)), node("n1", labels=LABELS), IDLE))
    assert reason == (None if matches else AFFINITY)


def test_node_selector_and_affinity_must_both_match() -> None:
    spec = {"nodeSelector": {"zone": "b"}, "affinity": required(expressions(expression("disk", "Exists")))}
    assert reason_of(NodeAffinity().filter(pod(**spec), node(labels=LABELS), IDLE)) == AFFINITY


# --- the NodeAffinity PreFilter's node names ---------------------------------------------------------


def daemon_pod(node_name: str) -> PodInfo:
    return pod(affinity=required({"matchFields": [expression("metadata.name", "In", node_name)]}))


def test_node_names_confine_the_pod() -> None:
    assert reason_of(AffinityNodeNames().filter(daemon_pod("n1"), node("n1"), IDLE)) is None
    assert reason_of(AffinityNodeNames().filter(daemon_pod("n1"), node("n2"), IDLE)) == NAMED_ELSEWHERE
    assert reason_of(AffinityNodeNames().filter(pod(), node("n2"), IDLE)) is None


def test_other_nodes_are_reported_by_the_prefilter_before_any_filter() -> None:
    cordoned_elsewhere = node("n2", unschedulable=True, taints=[taint("dedicated", "x")])
    assert reason_of(run_filters(daemon_pod("n1"), cordoned_elsewhere, IDLE)) == NAMED_ELSEWHERE
    assert reason_of(run_filters(daemon_pod("n2"), cordoned_elsewhere, IDLE)) == UNSCHEDULABLE


# --- NodeResourcesFit --------------------------------------------------------------------------------

GPU_NODE = {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "10Gi", "pods": "3", "nvidia.com/gpu": "2"}


def used(*pods: PodInfo) -> NodeUsage:
    usage = NodeUsage()
    for placed in pods:
        usage.add(placed)
    return usage


@pytest.mark.parametrize(
    ("requests", "usage", "reason"),
    [
        ({"cpu": "4", "memory": "8Gi"}, IDLE, None),
        ({"cpu": "4001m"}, IDLE, "Insufficient cpu"),
        ({"cpu": "1"}, "cpu 3500m", "Insufficient cpu"),
        ({"memory": "9Gi"}, IDLE, "Insufficient memory"),
        ({"ephemeral-storage": "11Gi"}, IDLE, "Insufficient ephemeral-storage"),
        ({"nvidia.com/gpu": "2"}, IDLE, None),
        ({"nvidia.com/gpu": "3"}, IDLE, "Insufficient nvidia.com/gpu"),
        ({"nvidia.com/gpu": "1"}, "gpu 2", "Insufficient nvidia.com/gpu"),
        ({"example.com/foo": "1"}, IDLE, "Insufficient example.com/foo"),  # the node has none
        ({"cpu": "5", "memory": "9Gi"}, IDLE, "Insufficient cpu"),  # kube's order: cpu first
        ({}, "cpu 4", None),  # requests nothing: fits a full node
        ({"cpu": "1"}, "three pods", "Too many pods"),
        ({}, "three pods", "Too many pods"),
    ],
)
def test_fit(requests: dict[str, str], usage: NodeUsage | str, reason: str | None) -> None:
    placed = {
        "cpu 3500m": used(pod(containers=containers({"cpu": "3500m"}))),
        "cpu 4": used(pod(containers=containers({"cpu": "4"}))),
        "gpu 2": used(pod(containers=containers({"nvidia.com/gpu": "2"}))),
        "three pods": used(pod(), pod(), pod()),
    }
    node_usage = placed[usage] if isinstance(usage, str) else usage
    fitting = reason_of(
        NodeResourcesFit().filter(
            pod(containers=containers(requests)), node(allocatable=GPU_NODE), node_usage
        )
    )
    assert fitting == reason


# --- NodePorts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wanted", "taken", "conflict"),
    [
        (HostPort("TCP", "0.0.0.0", 80), HostPort("TCP", "0.0.0.0", 80), True),
        (HostPort("TCP", "0.0.0.0", 80), HostPort("TCP", "10.0.0.1", 80), True),  # wildcard wants every IP
        (HostPort("TCP", "10.0.0.1", 80), HostPort("TCP", "0.0.0.0", 80), True),  # wildcard took every IP
        (HostPort("TCP", "10.0.0.1", 80), HostPort("TCP", "10.0.0.1", 80), True),
        (HostPort("TCP", "10.0.0.1", 80), HostPort("TCP", "10.0.0.2", 80), False),
        (HostPort("TCP", "0.0.0.0", 80), HostPort("UDP", "0.0.0.0", 80), False),
        (HostPort("TCP", "0.0.0.0", 80), HostPort("TCP", "0.0.0.0", 8080), False),
        (HostPort("SCTP", "::", 80), HostPort("SCTP", "0.0.0.0", 80), True),
        (HostPort("TCP", "::", 80), HostPort("TCP", "10.0.0.1", 80), False),  # only 0.0.0.0 is a wildcard
    ],
)
def test_port_conflicts(wanted: HostPort, taken: HostPort, conflict: bool) -> None:
    assert conflicts(wanted, taken) is conflict


def test_ports_filter() -> None:
    web = pod(containers=containers({}, ports=[{"containerPort": 80, "hostPort": 80}]))
    dns = pod(
        containers=containers(
            {}, ports=[{"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}]
        )
    )
    assert reason_of(NodePorts().filter(web, node(), IDLE)) is None
    assert reason_of(NodePorts().filter(web, node(), used(web))) == PORTS
    assert reason_of(NodePorts().filter(web, node(), used(dns))) is None
    assert reason_of(NodePorts().filter(pod(), node(), used(web))) is None


# --- registry and running ----------------------------------------------------------------------------


def test_default_filters_in_kube_order() -> None:
    assert [f.name for f in DEFAULT_FILTERS] == [
        "NodeAffinityPreFilter",
        "NodeUnschedulable",
        "TaintToleration",
        "NodeReadiness",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
    ]


def test_run_filters_gives_the_first_reason() -> None:
    worst = node(
        unschedulable=True,
        taints=[taint("a")],
        ready="False",
        labels={},
        allocatable={"cpu": "1", "pods": "0"},
    )
    picky = pod(nodeSelector={"zone": "a"}, containers=containers({"cpu": "2"}))
    assert reason_of(run_filters(picky, worst, IDLE)) == UNSCHEDULABLE
    assert (
        reason_of(run_filters(picky, worst, IDLE, DEFAULT_FILTERS[2:]))
        == "node(s) had untolerated taint {a: }"
    )
    assert reason_of(run_filters(picky, worst, IDLE, DEFAULT_FILTERS[3:])) == NOT_READY
    assert reason_of(run_filters(picky, worst, IDLE, DEFAULT_FILTERS[4:])) == AFFINITY
    assert reason_of(run_filters(picky, worst, IDLE, DEFAULT_FILTERS[6:])) == "Too many pods"


def test_run_filters_passes_a_good_node() -> None:
    assert reason_of(run_filters(pod(containers=containers({"cpu": "1"})), node(), IDLE)) is None
    assert reason_of(run_filters(pod(), node(unschedulable=True), IDLE, ())) is None


# --- the FailedScheduling message --------------------------------------------------------------------


def test_summary_in_kubes_words() -> None:
    reasons = {
        AFFINITY: 3,
        "Insufficient cpu": 2,
        "node(s) had untolerated taint {dedicated: gpu}": 1,
    }
    assert summarize_failures(6, reasons) == (
        "0/6 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu, "
        "3 node(s) didn't match Pod's node affinity/selector."
    )


def test_summary_sorts_whole_entries_as_text_like_kube() -> None:
    reasons = {"Insufficient cpu": 2, "Insufficient memory": 10, UNSCHEDULABLE: 2, "cpu load above 80%": 1}
    assert summarize_failures(15, reasons) == (
        "0/15 nodes are available: 1 cpu load above 80%, 10 Insufficient memory, 2 Insufficient cpu, "
        "2 node(s) were unschedulable."
    )


def test_summary_without_nodes_or_reasons() -> None:
    assert summarize_failures(0, {}) == "no nodes available to schedule pods"
    assert summarize_failures(3, {}) == "0/3 nodes are available:"
    assert summarize_failures(3, {AFFINITY: 0, PORTS: 3}) == f"0/3 nodes are available: 3 {PORTS}."
