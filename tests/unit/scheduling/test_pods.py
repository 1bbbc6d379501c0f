"""PodInfo parsing: identity and state, tolerations, host ports, node affinity, unsupported fields, errors."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from promsched.scheduling.objects.node_selectors import NodeSelectorRequirement, parse_int64
from promsched.scheduling.objects.nodes import Taint
from promsched.scheduling.objects.pods import HostPort, PodInfo, PodSpecError, Toleration
from promsched.scheduling.objects.resources import Resources


def pod_object(spec: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-0", "namespace": "shop", "uid": "u-1", **metadata},
        "spec": {"containers": [{"name": "app"}], **(spec or {})},
    }


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def test_identity_and_state() -> None:
    obj = pod_object(
        {
            "schedulerName": "promsched",
            "priority": 1000,
            "schedulingGates": [{"name": "wait"}],
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}],
        },
        resourceVersion="42",
        creationTimestamp="2025-01-02T03:04:05Z",
        deletionTimestamp="2025-01-02T03:05:00Z",
    )
    obj["status"] = {"phase": "Running", "startTime": "2025-01-02T03:04:07Z"}
    pod = PodInfo.from_object(obj)
    assert pod.started_at == 1735787047.0
    assert (pod.uid, pod.namespace, pod.name, pod.key) == ("u-1", "shop", "web-0", "shop/web-0")
    assert (pod.scheduler_name, pod.priority, pod.phase) == ("promsched", 1000, "Running")
    assert (pod.resource_version, pod.creation_timestamp) == ("42", "2025-01-02T03:04:05Z")
    assert pod.deletion_timestamp
    assert pod.scheduling_gated
    assert pod.requests == Resources(250, 64 * 1024**2)
    assert pod.unsupported == ()


def test_a_malformed_start_time_names_the_field() -> None:
    obj = pod_object()
    obj["status"] = {"startTime": "yesterday"}
    with pytest.raises(PodSpecError, match=r"status\.startTime: expected an RFC 3339 time"):
        PodInfo.from_object(obj)


def test_defaults() -> None:
    pod = PodInfo.from_object(pod_object())
    assert pod.started_at is None
    assert pod.scheduler_name == "default-scheduler"
    assert (pod.priority, pod.node_name, pod.phase) == (0, "", "Pending")
    assert not pod.deletion_timestamp
    assert not pod.scheduling_gated
    assert pod.required_affinity is None
    assert (pod.tolerations, pod.host_ports, dict(pod.node_selector)) == ((), frozenset(), {})


def test_key_follows_replace() -> None:
    pod = PodInfo("ns", "a")
    assert pod.key == "ns/a"
    assert dataclasses.replace(pod, name="b").key == "ns/b"


@pytest.mark.parametrize(
    ("phase", "terminal"), [("Pending", False), ("Running", False), ("Succeeded", True), ("Failed", True)]
)
def test_is_terminal(phase: str, terminal: bool) -> None:
    assert PodInfo("ns", "a", phase=phase).is_terminal is terminal


def test_tolerations_parsed_with_defaults() -> None:
    pod = PodInfo.from_object(
        pod_object(
            {
                "tolerations": [
                    {"key": "a", "value": "b"},
                    {"operator": "Exists"},
                    {"key": "c", "effect": "NoSchedule"},
                ]
            }
        )
    )
    assert pod.tolerations == (
        Toleration(key="a", operator="Equal", value="b"),
        Toleration(operator="Exists"),
        Toleration(key="c", effect="NoSchedule"),
    )


def test_pods_share_what_repeats_across_them() -> None:
    # Memory at 10,000 pods (issue 21): each decoded event brings its own copies of strings every pod
    # repeats; the parsed pods keep one of each.
    def parsed(name: str) -> PodInfo:
        obj = pod_object(
            {
                "nodeName": "".join(["node", "-1"]),
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
            },
            name=name,
            labels={"".join(["a", "pp"]): "".join(["we", "b"])},
        )
        return PodInfo.from_object(obj)

    first, second = parsed("web-0"), parsed("web-1")

    assert first.tolerations[0] is second.tolerations[0]
    assert first.node_name is second.node_name
    [(key_1, value_1)], [(key_2, value_2)] = first.labels.items(), second.labels.items()
    assert (key_1, value_1) == (key_2, value_2) == ("app", "web")
    assert key_1 is key_2
    assert value_1 is value_2


def test_a_toleration_of_the_wrong_type_is_still_parsed_alone() -> None:
    pod = PodInfo.from_object(pod_object({"tolerations": [{"key": "k", "operator": "Exists", "value": 5}]}))

    assert pod.tolerations == (Toleration(key="k", operator="Exists", value=5),)  # type: ignore[arg-type]


def test_many_tolerations_are_fine() -> None:
    tolerations = [{"key": f"k{index}", "operator": "Exists"} for index in range(200)]
    assert len(PodInfo.from_object(pod_object({"tolerations": tolerations})).tolerations) == 200


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (Toleration(key="k", value="v"), Taint("k", "v", "NoSchedule"), True),
        (Toleration(key="k", value="v"), Taint("k", "w", "NoSchedule"), False),
        (Toleration(key="k", value=""), Taint("k", "", "NoExecute"), True),  # empty effect: every effect
        (Toleration(key="k", operator="Exists"), Taint("k", "anything", "NoExecute"), True),
        (Toleration(key="k", operator="Exists", effect="NoSchedule"), Taint("k", "", "NoExecute"), False),
        (Toleration(key="other", operator="Exists"), Taint("k", "", "NoSchedule"), False),
        (Toleration(operator="Exists"), Taint("any", "thing", "NoExecute"), True),  # empty key + Exists
        (Toleration(operator="Exists", effect="NoSchedule"), Taint("any", "", "NoExecute"), False),
        (Toleration(key="k", operator="Gt", value="1"), Taint("k", "2", "NoSchedule"), False),  # unknown op
    ],
)
def test_toleration_semantics(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated


def test_host_ports() -> None:
    pod = PodInfo.from_object(
        pod_object(
            {
                "initContainers": [
                    {"name": "setup", "ports": [{"containerPort": 1, "hostPort": 1}]},  # finishes: frees it
                    {
                        "name": "proxy",
                        "restartPolicy": "Always",
                        "ports": [{"containerPort": 2, "hostPort": 2}],
                    },
                ],
                "containers": [
                    {
                        "name": "app",
                        "ports": [
                            {"containerPort": 80},
                            {"containerPort": 80, "hostPort": 8080},
                            {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                            {"containerPort": 90, "hostPort": 0},
                        ],
                    }
                ],
            }
        )
    )
    assert pod.host_ports == {
        HostPort("TCP", "0.0.0.0", 2),
        HostPort("TCP", "0.0.0.0", 8080),
        HostPort("UDP", "10.0.0.1", 53),
    }


def test_node_selector() -> None:
    pod = PodInfo.from_object(pod_object({"nodeSelector": {"disk": "ssd", "zone": "a"}}))
    assert dict(pod.node_selector) == {"disk": "ssd", "zone": "a"}


def test_required_affinity_compiled() -> None:
    pod = PodInfo.from_object(
        pod_object(
            {
                "affinity": required(
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
                    {},  # selects nothing: left out
                    {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]},
                )
            }
        )
    )
    affinity = pod.required_affinity
    assert affinity is not None
    assert [term.match_expressions for term in affinity.terms] == [
        (NodeSelectorRequirement("zone", "In", frozenset({"a", "b"})),),
        (NodeSelectorRequirement("cores", "Gt", frozenset({"8"}), bound=8),),
    ]
    assert affinity.node_names is None


def test_only_empty_terms_match_nothing() -> None:
    affinity = PodInfo.from_object(pod_object({"affinity": required({})})).required_affinity
    assert affinity is not None
    assert affinity.terms == ()
    assert not affinity.matches("n1", {})


def name_term(*names: str, extra: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]} for name in names]
        + list(extra)
    }


@pytest.mark.parametrize(
    ("terms", "names"),
    [
        ((name_term("n1"),), {"n1"}),  # a DaemonSet pod
        ((name_term("n1"), name_term("n2")), {"n1", "n2"}),  # terms ORed: union
        ((name_term("n1", "n1"),), {"n1"}),  # requirements ANDed: intersection
        ((name_term("n1", "n2"),), set()),  # conflicting: no node
        ((name_term("n1"), {"matchExpressions": [{"key": "a", "operator": "Exists"}]}), None),
        (({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},), None),
        ((name_term("n1"), {}), None),  # an empty term names no node either
    ],
)
def test_node_names_from_match_fields(terms: tuple[dict[str, Any], ...], names: set[str] | None) -> None:
    affinity = PodInfo.from_object(pod_object({"affinity": required(*terms)})).required_affinity
    assert affinity is not None
    assert affinity.node_names == (None if names is None else frozenset(names))


@pytest.mark.parametrize(
    ("requirement", "value", "admitted"),
    [
        (NodeSelectorRequirement("k", "In", frozenset({"a", "b"})), "a", True),
        (NodeSelectorRequirement("k", "In", frozenset({"a", "b"})), "c", False),
        (NodeSelectorRequirement("k", "In", frozenset({"a"})), None, False),
        (NodeSelectorRequirement("k", "NotIn", frozenset({"a"})), "b", True),
        (NodeSelectorRequirement("k", "NotIn", frozenset({"a"})), "a", False),
        (NodeSelectorRequirement("k", "NotIn", frozenset({"a"})), None, True),  # absent label is not in
        (NodeSelectorRequirement("k", "Exists"), "", True),
        (NodeSelectorRequirement("k", "Exists"), None, False),
        (NodeSelectorRequirement("k", "DoesNotExist"), None, True),
        (NodeSelectorRequirement("k", "DoesNotExist"), "x", False),
        (NodeSelectorRequirement("k", "Gt", bound=8), "16", True),
        (NodeSelectorRequirement("k", "Gt", bound=8), "8", False),
        (NodeSelectorRequirement("k", "Gt", bound=-1), "+0", True),
        (NodeSelectorRequirement("k", "Gt", bound=8), "16cores", False),  # not an integer
        (NodeSelectorRequirement("k", "Gt", bound=8), None, False),
        (NodeSelectorRequirement("k", "Lt", bound=8), "7", True),
        (NodeSelectorRequirement("k", "Lt", bound=8), "8", False),
        (NodeSelectorRequirement("k", "Lt", bound=8), "99999999999999999999", False),  # beyond int64
    ],
)
def test_requirement_semantics(
    requirement: NodeSelectorRequirement, value: str | None, admitted: bool
) -> None:
    assert requirement.admits(value) is admitted


@pytest.mark.parametrize(
    ("text", "number"),
    [("42", 42), ("-7", -7), ("+3", 3), ("1.0", None), (" 1", None), ("1_0", None), ("", None)],
)
def test_parse_int64(text: str, number: int | None) -> None:
    assert parse_int64(text) == number


def test_unsupported_fields() -> None:
    pod = PodInfo.from_object(
        pod_object(
            {
                "volumes": [
                    {"name": "cache", "emptyDir": {}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "lun", "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.x:y", "lun": 0}},
                ],
                "resourceClaims": [{"name": "gpu"}],
            }
        )
    )
    assert pod.unsupported == ("spec.volumes[2].iscsi", "spec.resourceClaims")


def test_empty_unsupported_fields_are_fine() -> None:
    spec = {
        "affinity": {"podAffinity": {}, "podAntiAffinity": None},
        "topologySpreadConstraints": [],
        "volumes": [],
    }
    assert PodInfo.from_object(pod_object(spec)).unsupported == ()


EXPRESSIONS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        (
            {"containers": [{"name": "a", "resources": {"requests": {"memory": "1GB"}}}]},
            "spec.containers[0].resources.requests.memory",
        ),
        (
            {"affinity": required({"matchExpressions": [{"key": "k", "operator": "Like", "values": ["a"]}]})},
            f"{EXPRESSIONS}.matchExpressions[0].operator",
        ),
        (
            {"affinity": required({"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["big"]}]})},
            f"{EXPRESSIONS}.matchExpressions[0].values",
        ),
        (
            {
                "affinity": required(
                    {"matchExpressions": [{"key": "k", "operator": "Lt", "values": ["1", "2"]}]}
                )
            },
            f"{EXPRESSIONS}.matchExpressions[0].values",
        ),
        (
            {"affinity": required({"matchExpressions": [{"key": "k", "operator": "In"}]})},
            f"{EXPRESSIONS}.matchExpressions[0].values",
        ),
        (
            {
                "affinity": required(
                    {"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["a"]}]}
                )
            },
            f"{EXPRESSIONS}.matchExpressions[0].values",
        ),
        (
            {
                "affinity": required(
                    {"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["a"]}]}
                )
            },
            f"{EXPRESSIONS}.matchFields[0].key",
        ),
        (
            {"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "Exists"}]})},
            f"{EXPRESSIONS}.matchFields[0].operator",
        ),
        (
            {
                "affinity": required(
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
                )
            },
            f"{EXPRESSIONS}.matchFields[0].values",
        ),
        ({"nodeSelector": {"disk": True}}, "spec.nodeSelector.disk"),
        ({"tolerations": {"key": "a"}}, "spec.tolerations"),
        ({"priority": "high"}, "spec.priority"),
        (
            {"containers": [{"name": "a", "ports": [{"hostPort": "80"}]}]},
            "spec.containers[0].ports[0].hostPort",
        ),
    ],
)
def test_malformed_spec_names_the_field(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(PodSpecError) as raised:
        PodInfo.from_object(pod_object(spec))
    assert str(raised.value).startswith(f"{path}:")
    assert isinstance(raised.value, ValueError)


def test_the_podscheduled_condition_is_patched_only_when_it_changes_and_keeps_its_transition_time() -> None:
    fresh = PodInfo.from_object(pod_object())
    assert fresh.scheduled_condition is None
    first = fresh.scheduled_condition_patch("False", "Unschedulable", "0/3 nodes", now="T1")
    assert first == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes",
        "lastTransitionTime": "T1",
    }
    stored = pod_object()
    stored["status"] = {"conditions": [{"type": "Ready", "status": "False"}, first]}
    pod = PodInfo.from_object(stored)
    assert pod.scheduled_condition_patch("False", "Unschedulable", "0/3 nodes", now="T2") is None
    changed = pod.scheduled_condition_patch("False", "Unschedulable", "0/4 nodes", now="T2")
    assert changed is not None
    assert changed["lastTransitionTime"] == "T1"  # the status did not change
    flipped = pod.scheduled_condition_patch("True", "", "", now="T3")
    assert flipped is not None
    assert flipped["lastTransitionTime"] == "T3"
