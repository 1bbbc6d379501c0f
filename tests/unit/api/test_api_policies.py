"""The SchedulingPolicy models: defaults, validation and the wording of their errors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from promsched.api.builtins import BUILTIN_PLUGIN_NAMES, BuiltinPlugin
from promsched.api.fields import Mode, PolicyError, parse_duration
from promsched.api.policies import (
    NodeIdentitySource,
    OnMissingMetrics,
    SchedulingPolicy,
    SchedulingPolicySpec,
    parse_spec,
)
from promsched.api.statuses import (
    Condition,
    ConditionStatus,
    ConditionType,
    Decision,
    SchedulingPolicyStatus,
    find_condition,
    parse_status,
    set_condition,
)

EXAMPLES = Path(__file__).parents[3] / "examples"

SPEC: dict[str, Any] = {
    "schedulerName": "promsched",
    "prometheus": {"url": "http://127.0.0.1:9090"},
    "plugins": [{"name": "cpu", "weight": 3}],
}
CPU = {"name": "cpu", "weight": 3}
GPU = {"name": "gpu", "query": "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)"}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0s", 0.0),
        ("0.5s", 0.5),
        ("500ms", 0.5),
        ("5s", 5.0),
        ("1m30s", 90.0),
        ("2h", 7200.0),
        ("1.5h", 5400.0),
    ],
)
def test_parse_duration_reads_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "0", "5", "5 m", "-5s", "1d", "5S", "m5", "1h 30m", "1e3s"])
def test_parse_duration_error_names_the_field_and_the_syntax(text: str) -> None:
    with pytest.raises(ValueError, match=r"^spec\.refreshInterval: .* must be a Go duration, e\.g\. 500ms"):
        parse_duration(text, "spec.refreshInterval")


def test_minimal_spec_gets_the_contract_defaults() -> None:
    spec = parse_spec(SPEC)

    assert spec.mode is Mode.ENFORCE
    assert spec.node_identity.source is NodeIdentitySource.UNAME_NODENAME
    assert spec.on_missing_metrics is OnMissingMetrics.NEUTRAL
    assert (spec.refresh_interval_seconds, spec.stale_after_seconds) == (15.0, 120.0)
    assert spec.prometheus.timeout_seconds == 5.0
    assert spec.decision_history == 10
    assert spec.plugins[0].time_range_seconds == 300.0
    assert spec.plugins[0].is_builtin
    assert spec.plugin("cpu") is spec.plugins[0]
    assert spec.plugin("memory") is None


def test_snake_case_names_and_camel_case_aliases_both_work() -> None:
    by_alias = parse_spec({**SPEC, "plugins": [{"name": "cpu", "timeRange": "1m"}]})
    by_name = SchedulingPolicySpec.model_validate(
        {
            "scheduler_name": "promsched",
            "prometheus": {"url": "http://127.0.0.1:9090"},
            "plugins": [{"name": "cpu", "time_range": "1m"}],
        }
    )

    assert by_alias == by_name
    assert by_alias.to_object()["plugins"] == [{"name": "cpu", "weight": 1, "timeRange": "1m"}]


def test_models_are_frozen() -> None:
    spec = parse_spec(SPEC)

    with pytest.raises(ValueError, match="frozen"):
        spec.scheduler_name = "other"  # type: ignore[misc]


def test_builtin_plugin_names_match_the_contract() -> None:
    assert BUILTIN_PLUGIN_NAMES == ("cpu", "memory", "diskIO", "diskSpace", "network")
    assert BuiltinPlugin("diskIO") is BuiltinPlugin.DISK_IO


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {**SPEC, "plugins": []}, "spec.plugins: List should have at least 1 item", id="no-plugins"
        ),
        pytest.param(
            {**SPEC, "plugins": [CPU] * 21}, "spec.plugins: List should have at most 20", id="21-plugins"
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "cpu", "weight": 0}]},
            "at least one plugin needs weight > 0",
            id="all-weights-zero",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "cpu", "weight": 101}]},
            "spec.plugins[0].weight: Input should be less than or equal to 100",
            id="weight-over-100",
        ),
        pytest.param({**SPEC, "plugins": [CPU, CPU]}, "cpu appear more than once", id="duplicate-names"),
        pytest.param(
            {**SPEC, "plugins": [{"name": "gpu"}]},
            "spec.plugins[0]: query is required for custom plugin 'gpu'",
            id="custom-without-query",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "cpu", "query": "up"}]},
            "query is not allowed for built-in plugin 'cpu'",
            id="builtin-with-query",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "cpu", "threshold": 120}]},
            "threshold of built-in plugin 'cpu' is a percentage, 0..100",
            id="builtin-threshold-over-100",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "cpu", "devices": ["eth0"]}]},
            "devices applies to the network plugin only; remove it from plugin 'cpu'",
            id="devices-on-cpu",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "network", "devices": ["eth0;drop"]}]},
            "spec.plugins[0].devices[0]: must be a device name",
            id="unsafe-device",
        ),
        pytest.param(
            {
                **SPEC,
                "plugins": [{"name": "network", "devices": ["eth0"], "deviceExcludePattern": "veth.*"}],
            },
            "set either devices (the devices to measure) or deviceExcludePattern (the devices to leave "
            "out), not both, in plugin 'network'",
            id="devices-and-exclude-pattern",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "diskSpace", "source": "RecordingRules"}]},
            "spec.plugins[0]: source RecordingRules: the node mixin records no rule for plugin "
            "'diskSpace'; remove source or set it to NodeExporter",
            id="rules-for-disk-space",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "network", "source": "RecordingRules", "devices": ["eth0"]}]},
            "devices needs source NodeExporter in plugin 'network': the node mixin's network rules give "
            "bytes/s summed over every device but lo; remove devices or source",
            id="rules-with-network-devices",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "network", "source": "RecordingRules", "threshold": 80}]},
            "threshold needs source NodeExporter in plugin 'network'",
            id="rules-with-network-threshold",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "gpu", "query": "up", "source": "NodeExporter"}]},
            "source applies to built-in plugins only; remove it from plugin 'gpu'",
            id="source-on-custom",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "cpu", "source": "KubePrometheus"}]},
            "spec.plugins[0].source: Input should be 'NodeExporter' or 'RecordingRules'",
            id="unknown-source",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "cpu", "deviceExcludePattern": "veth.*"}]},
            "deviceExcludePattern applies to the network plugin only; remove it from plugin 'cpu'",
            id="exclude-pattern-on-cpu",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "diskSpace", "mountpoint": 'var"} or vector(1)'}]},
            "spec.plugins[0].mountpoint: must be an absolute path",
            id="unsafe-mountpoint",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "diskIO", "devicePattern": "sd[a-z]+\n"}]},
            "spec.plugins[0].devicePattern: must not contain control characters",
            id="device-pattern-with-newline",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "memory", "higherIsBetter": True}]},
            "higherIsBetter applies to custom plugins only",
            id="higher-is-better-on-builtin",
        ),
        pytest.param(
            {**SPEC, "plugins": [{**GPU, "normalization": {"type": "Absolute", "min": 5, "max": 5}}]},
            "Absolute normalization needs min and max with min < max",
            id="absolute-min-not-below-max",
        ),
        pytest.param(
            {**SPEC, "plugins": [{**GPU, "normalization": {"type": "Relative", "max": 5}}]},
            "min and max apply to Absolute normalization only",
            id="relative-with-bounds",
        ),
        pytest.param(
            {**SPEC, "plugins": [{"name": "cpu", "timeRange": "5 minutes"}]},
            "spec.plugins[0].timeRange: '5 minutes' must be a Go duration",
            id="bad-duration",
        ),
        pytest.param(
            {**SPEC, "refreshInterval": "500ms"}, "refreshInterval must be at least 1s", id="refresh-fast"
        ),
        pytest.param({**SPEC, "staleAfter": "0s"}, "staleAfter must be longer than 0s", id="stale-zero"),
        pytest.param(
            {**SPEC, "prometheus": {"url": "ftp://prometheus:9090"}},
            "spec.prometheus.url: must be an http:// or https:// URL",
            id="ftp-url",
        ),
        pytest.param(
            {**SPEC, "prometheus": {"url": "http://p:9090", "timeout": "0s"}},
            "timeout must be longer than 0s",
            id="zero-timeout",
        ),
        pytest.param(
            {**SPEC, "prometheus": {"url": "http://p:9090", "auth": {"bearerToken": {}, "basicAuth": {}}}},
            "spec.prometheus.auth.bearerToken.namespace: required field is missing",
            id="secret-ref-without-namespace",
        ),
        pytest.param(
            {
                **SPEC,
                "prometheus": {
                    "url": "http://p:9090",
                    "auth": {
                        "bearerToken": {"namespace": "mon", "name": "p", "key": "token"},
                        "basicAuth": {"namespace": "mon", "name": "p"},
                    },
                },
            },
            "set either bearerToken or basicAuth, not both",
            id="two-credentials",
        ),
        pytest.param(
            {**SPEC, "nodeIdentity": {"source": "Label"}},
            "spec.nodeIdentity: label is required when source is Label",
            id="label-source-without-label",
        ),
        pytest.param(
            {**SPEC, "schedulerName": "Promsched"},
            "spec.schedulerName: must be a lowercase DNS subdomain",
            id="uppercase-scheduler-name",
        ),
        pytest.param(
            {key: value for key, value in SPEC.items() if key != "schedulerName"},
            "spec.schedulerName: required field is missing",
            id="no-scheduler-name",
        ),
        pytest.param(
            {**SPEC, "mode": "DryRun"}, "spec.mode: Input should be 'Enforce' or 'Shadow'", id="bad-mode"
        ),
        pytest.param(
            {**SPEC, "decisionHistory": 51}, "spec.decisionHistory: Input should be less", id="history-51"
        ),
        pytest.param(
            {**SPEC, "plugin": []},
            "spec.plugin: unknown field; remove it or fix its spelling",
            id="unknown-field",
        ),
    ],
)
def test_invalid_spec_is_rejected_naming_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_spec(spec)

    assert message in str(caught.value)


def test_custom_plugin_with_everything_validates() -> None:
    spec = parse_spec(
        {
            **SPEC,
            "plugins": [
                {
                    **GPU,
                    "timeRange": "0s",
                    "threshold": 95,
                    "nodeLabel": "Hostname",
                    "higherIsBetter": False,
                    "normalization": {"type": "Absolute", "min": 0, "max": 100},
                }
            ],
        }
    )

    plugin = spec.plugins[0]
    assert not plugin.is_builtin
    assert plugin.time_range_seconds == 0.0
    assert plugin.normalization is not None
    assert (plugin.normalization.min, plugin.normalization.max) == (0, 100)


def test_from_object_names_the_full_field_path() -> None:
    obj = {
        "apiVersion": "promsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "p", "generation": 4},
        "spec": {**SPEC, "plugins": [{"name": "cpu", "weight": -1}]},
    }

    with pytest.raises(
        PolicyError, match=r"spec\.plugins\[0\]\.weight: Input should be greater than or equal to 0"
    ):
        SchedulingPolicy.from_object(obj)


def test_from_object_rejects_another_kind() -> None:
    with pytest.raises(PolicyError, match="kind: Input should be 'SchedulingPolicy'"):
        SchedulingPolicy.from_object({"apiVersion": "promsched.io/v1alpha1", "kind": "Pod", "spec": SPEC})


def test_from_object_reads_metadata_and_status() -> None:
    policy = SchedulingPolicy.from_object(
        {
            "apiVersion": "promsched.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": "p", "generation": 4},
            "spec": SPEC,
            "status": {"observedGeneration": 3, "scheduled": 2, "kopf": {"progress": {}}},
        }
    )

    assert (policy.name, policy.generation) == ("p", 4)
    assert policy.status is not None
    assert (policy.status.observed_generation, policy.status.scheduled) == (3, 2)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.name)
def test_policy_examples_validate(path: Path) -> None:
    documents = [
        doc for doc in yaml.safe_load_all(path.read_text()) if doc and doc["kind"] == "SchedulingPolicy"
    ]

    for document in documents:
        SchedulingPolicy.from_object(document)


def test_there_are_policy_examples() -> None:
    names = {path.name for path in EXAMPLES.glob("*.yaml")}

    assert {"original-profile.yaml", "gpu-dcgm.yaml", "shadow.yaml", "sandbox-policy.yaml"} <= names


def test_sandbox_policy_uses_all_builtins_and_the_placeholder_url() -> None:
    policy = SchedulingPolicy.from_object(yaml.safe_load((EXAMPLES / "sandbox-policy.yaml").read_text()))

    assert policy.spec.scheduler_name == "promsched"
    assert policy.spec.prometheus.url == "http://127.0.0.1:9090"
    assert {plugin.name for plugin in policy.spec.plugins} == set(BUILTIN_PLUGIN_NAMES)


def test_deployment_example_uses_promsched() -> None:
    deployment = yaml.safe_load((EXAMPLES / "deployment.yaml").read_text())

    assert deployment["spec"]["template"]["spec"]["schedulerName"] == "promsched"


NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
LATER = datetime(2025, 1, 2, 3, 9, 5, tzinfo=UTC)


def _ready(status: ConditionStatus, at: datetime, reason: str = "Checked") -> Condition:
    return Condition(type=ConditionType.READY, status=status, reason=reason, last_transition_time=at)


def test_set_condition_keeps_the_transition_time_while_status_holds() -> None:
    conditions = set_condition([], _ready(ConditionStatus.TRUE, NOW))
    conditions = set_condition(conditions, _ready(ConditionStatus.TRUE, LATER, reason="Rechecked"))

    ready = find_condition(conditions, ConditionType.READY)
    assert ready is not None
    assert (ready.reason, ready.last_transition_time) == ("Rechecked", NOW)
    assert len(conditions) == 1


def test_set_condition_moves_the_transition_time_when_status_changes() -> None:
    conditions = set_condition([_ready(ConditionStatus.TRUE, NOW)], _ready(ConditionStatus.FALSE, LATER))

    assert conditions == [_ready(ConditionStatus.FALSE, LATER)]
    assert find_condition(conditions, ConditionType.CONFLICT) is None


def test_status_round_trips_through_the_wire_form() -> None:
    decision = Decision.model_validate(
        {
            "pod": "default/web-1",
            "node": "node-3",
            "time": "2025-01-02T03:04:05Z",
            "latencyMs": 12.5,
            "generation": 2,
            "mode": "Enforce",
            "topNodes": [
                {"node": "node-3", "total": 80.5, "plugins": [{"name": "cpu", "raw": 12.0, "score": 88}]}
            ],
            "filtered": [{"reason": "cpu above threshold 85", "count": 2}],
        }
    )
    status = SchedulingPolicyStatus(
        observed_generation=2,
        conditions=[_ready(ConditionStatus.TRUE, NOW)],
        scheduled=1,
        last_decision=decision,
        recent_decisions=[decision],
    )

    wire = status.to_object()

    assert wire["lastDecision"]["topNodes"][0]["plugins"][0] == {"name": "cpu", "raw": 12.0, "score": 88.0}
    assert wire["conditions"][0]["lastTransitionTime"] == "2025-01-02T03:04:05Z"
    assert parse_status(wire) == status
    assert parse_status(None) == SchedulingPolicyStatus()


def test_invalid_status_names_the_field() -> None:
    with pytest.raises(PolicyError, match=r"status\.conditions\[0\]\.status: Input should be 'True'"):
        parse_status(
            {"conditions": [{"type": "Ready", "status": "Yes", "reason": "X", "lastTransitionTime": NOW}]}
        )
