"""The SchedulingPolicy API on a real API server: the CRD's schema and CEL rules, columns and docs."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from promsched.api.converting import convert_file
from promsched.api.crds import CRD_FILE, CRD_NAME
from promsched.api.fields import Mode
from promsched.api.policies import API_VERSION, KIND, SchedulingPolicy, SchedulingPolicySpec
from promsched.api.statuses import (
    Condition,
    ConditionStatus,
    ConditionType,
    Decision,
    SchedulingPolicyStatus,
    parse_status,
)
from promsched.sandbox.control_plane.clusters import Sandbox

pytestmark = pytest.mark.integration

REPO = Path(__file__).parents[2]
EXAMPLES = REPO / "examples"
POLICY_EXAMPLES = sorted(
    path for path in EXAMPLES.glob("*.yaml") if yaml.safe_load(path.read_text()).get("kind") == KIND
)
OTHER_OBJECT_EXAMPLES = [EXAMPLES / "deployment.yaml"]
API_READY_TIMEOUT = 60.0

NewName = Callable[[], str]


def _eventually(check: Callable[[], bool], what: str, timeout: float = API_READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def api(sandbox: Sandbox) -> Sandbox:
    """The sandbox with the SchedulingPolicy CRD applied and served. The CRD is left in place: other
    modules' policies may still need it."""
    sandbox.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / CRD_FILE))
    sandbox.wait_established(CRD_NAME)
    _eventually(
        lambda: sandbox.kubectl("get", "schedulingpolicies", check=False).returncode == 0,
        "kubectl get schedulingpolicies to work",
    )
    return sandbox


@pytest.fixture
def new_name(api: Sandbox) -> Iterator[NewName]:
    """Makes unique policy names; every policy so named is deleted afterwards."""
    names: list[str] = []

    def make() -> str:
        names.append(f"api-test-{uuid.uuid4().hex[:10]}")
        return names[-1]

    yield make
    if names:
        api.kubectl("delete", "schedulingpolicies", *names, "--ignore-not-found", "--wait=false")


def _manifest(name: str, spec: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec})


def _stored(api: Sandbox, name: str) -> dict[str, Any]:
    stored: dict[str, Any] = yaml.safe_load(api.kubectl("get", "schedulingpolicy", name, "-o", "yaml").stdout)
    return stored


@pytest.mark.parametrize("server_side", [True, False], ids=["server-side", "client-side"])
@pytest.mark.parametrize("path", POLICY_EXAMPLES, ids=lambda path: path.name)
def test_example_policy_applies_and_round_trips(
    api: Sandbox, new_name: NewName, path: Path, server_side: bool
) -> None:
    example = yaml.safe_load(path.read_text())
    name = new_name()

    api.kubectl(
        "apply",
        *(["--server-side"] if server_side else []),
        "-f",
        "-",
        input=_manifest(name, example["spec"]),
    )

    stored = _stored(api, name)
    # The API server's defaults must be the models' defaults, or promsched would see another policy.
    assert stored["spec"] == SchedulingPolicySpec.model_validate(example["spec"]).to_object()
    assert SchedulingPolicy.from_object(stored).spec == SchedulingPolicySpec.model_validate(example["spec"])


def test_percentiles_and_thresholds_that_cannot_fight_are_accepted(api: Sandbox, new_name: NewName) -> None:
    """The CEL rules refuse no more than the models: a p90, avg over an instant, and hot thresholds past
    the placement ones (above for a load, below where higherIsBetter; 85.5 a double, 80 an int)."""
    spec = {
        **_plugins(
            {"name": "cpu", "aggregation": "p90", "threshold": 80},
            {"name": "memory", "timeRange": "0s", "aggregation": "avg"},
            {**GPU, "higherIsBetter": True, "threshold": 5},
        ),
        "rebalance": {
            "mode": "DryRun",
            "thresholds": [
                {"plugin": "cpu", "hotThreshold": 85.5, "targetThreshold": 70},
                {"plugin": "gpu", "hotThreshold": 4, "targetThreshold": 9},
            ],
        },
    }
    name = new_name()

    api.kubectl("apply", "-f", "-", input=_manifest(name, spec))

    assert SchedulingPolicy.from_object(_stored(api, name)).spec == SchedulingPolicySpec.model_validate(spec)


@pytest.mark.parametrize("path", OTHER_OBJECT_EXAMPLES, ids=lambda path: path.name)
def test_other_examples_are_accepted_by_the_server(api: Sandbox, path: Path) -> None:
    api.kubectl("apply", "--dry-run=server", "-f", str(path))


SPEC: dict[str, Any] = {
    "schedulerName": "promsched",
    "prometheus": {"url": "http://127.0.0.1:9090"},
    "plugins": [{"name": "cpu", "weight": 3}],
}
GPU = {"name": "gpu", "query": "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)"}


def _plugins(*plugins: dict[str, Any]) -> dict[str, Any]:
    return {**SPEC, "plugins": list(plugins)}


def _prometheus(**fields: Any) -> dict[str, Any]:
    return {**SPEC, "prometheus": {"url": "http://127.0.0.1:9090", **fields}}


# (spec, substrings the API server's error must contain: the field path first, then what is wrong)
INVALID_SPECS = [
    pytest.param(_plugins(), ["spec.plugins", "at least 1"], id="no-plugins"),
    pytest.param(
        _plugins(*({**GPU, "name": f"custom{index}"} for index in range(21))),
        ["spec.plugins", "at most 20"],
        id="21-plugins",
    ),
    pytest.param(
        _plugins({"name": "cpu", "weight": 0}, {"name": "memory", "weight": 0}),
        ["spec.plugins", "at least one plugin needs weight > 0"],
        id="all-weights-zero",
    ),
    pytest.param(
        _plugins({"name": "cpu", "weight": 101}),
        ["spec.plugins[0].weight", "less than or equal to 100"],
        id="weight-over-100",
    ),
    pytest.param(
        _plugins({"name": "cpu"}, {"name": "cpu"}), ["spec.plugins", "duplicate"], id="duplicate-names"
    ),
    pytest.param(
        _plugins({"name": "gpu"}),
        ["spec.plugins[0].query", "query is required for a custom plugin"],
        id="custom-without-query",
    ),
    pytest.param(
        _plugins({"name": "memory", "query": "up"}),
        ["spec.plugins[0].query", "query is not allowed for a built-in plugin"],
        id="builtin-with-query",
    ),
    pytest.param(
        _plugins({"name": "cpu", "threshold": 150}),
        ["spec.plugins[0].threshold", "use a value from 0 to 100"],
        id="builtin-threshold-over-100",
    ),
    pytest.param(
        _plugins({**GPU, "normalization": {"type": "Absolute", "min": 100, "max": 0}}),
        ["spec.plugins[0].normalization", "Absolute needs min and max with min < max"],
        id="absolute-min-above-max",
    ),
    pytest.param(
        _plugins({**GPU, "normalization": {"type": "Absolute", "min": 0}}),
        ["spec.plugins[0].normalization", "Absolute needs min and max"],
        id="absolute-without-max",
    ),
    pytest.param(
        _plugins({**GPU, "normalization": {"type": "Relative", "min": 0, "max": 1}}),
        ["spec.plugins[0].normalization", "min and max apply to type Absolute only"],
        id="relative-with-bounds",
    ),
    pytest.param(
        _plugins({"name": "cpu", "timeRange": "5 minutes"}),
        ["spec.plugins[0].timeRange", "must be a Go duration"],
        id="duration-with-space",
    ),
    pytest.param(
        _plugins({"name": "cpu", "timeRange": "5"}),
        ["spec.plugins[0].timeRange", "must be a Go duration"],
        id="duration-without-unit",
    ),
    pytest.param(
        {**SPEC, "refreshInterval": "200ms"},
        ["spec.refreshInterval", "must be at least 1s"],
        id="refresh-below-1s",
    ),
    pytest.param({**SPEC, "staleAfter": "0s"}, ["spec.staleAfter", "longer than 0s"], id="stale-after-zero"),
    pytest.param(_prometheus(timeout="0s"), ["spec.prometheus.timeout", "longer than 0s"], id="timeout-zero"),
    pytest.param(
        {**SPEC, "prometheus": {"url": "ftp://prometheus:9090"}},
        ["spec.prometheus.url", "must be an http:// or https:// URL"],
        id="ftp-url",
    ),
    pytest.param(
        {**SPEC, "prometheus": {"url": "prometheus:9090"}},
        ["spec.prometheus.url", "must be an http:// or https:// URL"],
        id="url-without-scheme",
    ),
    pytest.param({**SPEC, "prometheus": {}}, ["spec.prometheus.url", "Required value"], id="no-url"),
    pytest.param(
        _prometheus(
            auth={
                "bearerToken": {"namespace": "monitoring", "name": "prom", "key": "token"},
                "basicAuth": {"namespace": "monitoring", "name": "prom"},
            }
        ),
        ["spec.prometheus.auth", "either bearerToken or basicAuth"],
        id="two-credentials",
    ),
    pytest.param(
        _prometheus(auth={"ca": {"namespace": "Monitoring", "name": "ca", "key": "ca.crt"}}),
        ["spec.prometheus.auth.ca.namespace", "lowercase DNS label"],
        id="bad-secret-namespace",
    ),
    pytest.param(
        {**SPEC, "schedulerName": "My_Scheduler"},
        ["spec.schedulerName", "lowercase DNS subdomain"],
        id="bad-scheduler-name",
    ),
    pytest.param(
        {key: value for key, value in SPEC.items() if key != "schedulerName"},
        ["spec.schedulerName", "Required value"],
        id="no-scheduler-name",
    ),
    pytest.param(
        _plugins({"name": "network", "devices": ['eth0"} or vector(1) #']}),
        ["spec.plugins[0].devices[0]", "must be a device name"],
        id="unsafe-device-name",
    ),
    pytest.param(
        _plugins({"name": "cpu", "devices": ["eth0"]}),
        ["spec.plugins[0].devices", "applies to the network plugin only"],
        id="devices-on-cpu",
    ),
    pytest.param(
        _plugins({"name": "network", "devices": ["eth0"], "deviceExcludePattern": "veth.*"}),
        ["spec.plugins[0].deviceExcludePattern", "either devices", "not both"],
        id="devices-and-exclude-pattern",
    ),
    pytest.param(
        _plugins({"name": "diskSpace", "source": "RecordingRules"}),
        ["spec.plugins[0].source", "the node mixin records no rule for this plugin"],
        id="rules-for-disk-space",
    ),
    pytest.param(
        _plugins({"name": "network", "source": "RecordingRules", "deviceExcludePattern": "lo"}),
        ["spec.plugins[0].source", "need source NodeExporter in plugin network"],
        id="rules-with-network-exclusions",
    ),
    pytest.param(
        _plugins({"name": "gpu", "query": "up", "source": "NodeExporter"}),
        ["spec.plugins[0].source", "applies to built-in plugins only"],
        id="source-on-custom",
    ),
    pytest.param(
        _plugins({"name": "cpu", "source": "KubePrometheus"}),
        ["spec.plugins[0].source", "Unsupported value"],
        id="unknown-source",
    ),
    pytest.param(
        _plugins({"name": "diskSpace", "mountpoint": "var/lib"}),
        ["spec.plugins[0].mountpoint", "must be an absolute path"],
        id="relative-mountpoint",
    ),
    pytest.param(
        _plugins({"name": "diskSpace", "mountpoint": '/"} or vector(1)'}),
        ["spec.plugins[0].mountpoint", "must be an absolute path"],
        id="unsafe-mountpoint",
    ),
    pytest.param(
        _plugins({"name": "network", "devicePattern": "eth.*"}),
        ["spec.plugins[0].devicePattern", "applies to the diskIO plugin only"],
        id="device-pattern-on-network",
    ),
    pytest.param(
        _plugins({"name": "memory", "higherIsBetter": True}),
        ["spec.plugins[0].higherIsBetter", "applies to custom plugins only"],
        id="higher-is-better-on-builtin",
    ),
    pytest.param(
        _plugins({"name": "cpu", "nodeLabel": "instance"}),
        ["spec.plugins[0].nodeLabel", "applies to custom plugins only"],
        id="node-label-on-builtin",
    ),
    pytest.param(
        _plugins({"name": "gpu util", "query": "up"}),
        ["spec.plugins[0].name", "must start with a letter"],
        id="plugin-name-with-space",
    ),
    pytest.param(
        {**SPEC, "nodeIdentity": {"source": "InternalIP"}},
        ["spec.nodeIdentity.label", "required when source is Label or InternalIP"],
        id="internal-ip-without-label",
    ),
    pytest.param(
        {**SPEC, "nodeIdentity": {"source": "Label", "label": "node-name"}},
        ["spec.nodeIdentity.label", "Prometheus label name"],
        id="bad-node-label",
    ),
    pytest.param({**SPEC, "mode": "DryRun"}, ["spec.mode", "Unsupported value"], id="bad-mode"),
    pytest.param(
        {**SPEC, "onMissingMetrics": "Skip"},
        ["spec.onMissingMetrics", "Unsupported value"],
        id="bad-on-missing",
    ),
    pytest.param(
        {**SPEC, "decisionHistory": 51}, ["spec.decisionHistory", "less than or equal to 50"], id="history"
    ),
    pytest.param({**SPEC, "weights": {"cpu": 3}}, ['unknown field "spec.weights"'], id="unknown-field"),
    pytest.param(
        _plugins({"name": "cpu", "aggregation": "p101"}),
        ["spec.plugins[0].aggregation", "is not a valid aggregation; use avg, max, or pNN with NN in 1..99"],
        id="aggregation-p101",
    ),
    pytest.param(
        _plugins({"name": "cpu", "timeRange": "0s", "aggregation": "p90"}),
        ["spec.plugins[0].aggregation", "max or pNN needs a window: timeRange 0s reads one instant value"],
        id="aggregation-without-window",
    ),
    pytest.param(
        _plugins({**GPU, "aggregation": "max"}),
        ["spec.plugins[0].aggregation", "applies to built-in plugins only"],
        id="aggregation-on-custom",
    ),
    pytest.param(
        {
            **_plugins({"name": "memory"}, {"name": "cpu", "threshold": 80}),
            "rebalance": {
                "mode": "DryRun",
                "thresholds": [{"plugin": "cpu", "hotThreshold": 80, "targetThreshold": 70}],
            },
        },
        [
            "spec.rebalance",
            "spec.rebalance.thresholds[].hotThreshold must be above spec.plugins[].threshold of its plugin",
        ],
        id="hot-threshold-at-placement-threshold",
    ),
    pytest.param(
        {
            **_plugins({"name": "cpu"}, {**GPU, "higherIsBetter": True, "threshold": 5}),
            "rebalance": {
                "mode": "DryRun",
                "thresholds": [{"plugin": "gpu", "hotThreshold": 6, "targetThreshold": 9}],
            },
        },
        ["spec.rebalance", "(below it where higherIsBetter)"],
        id="hot-threshold-past-a-higher-is-better-threshold",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), INVALID_SPECS)
def test_invalid_policy_is_rejected_naming_the_field(
    api: Sandbox, new_name: NewName, spec: dict[str, Any], expected: list[str]
) -> None:
    name = new_name()

    result = api.kubectl("apply", "-f", "-", input=_manifest(name, spec), check=False)

    assert result.returncode != 0, f"the API server accepted an invalid policy: {spec}"
    for substring in expected:
        assert substring.lower() in result.stderr.lower(), f"{substring!r} not in: {result.stderr}"
    assert api.kubectl("get", "schedulingpolicy", name, check=False).returncode != 0


def _status(node: str) -> SchedulingPolicyStatus:
    now = "2025-01-02T03:04:05Z"
    decision = Decision.model_validate(
        {
            "pod": "default/web-1",
            "node": node,
            "time": now,
            "latencyMs": 4.5,
            "generation": 1,
            "mode": Mode.ENFORCE,
            "topNodes": [
                {"node": node, "total": 91.5, "plugins": [{"name": "cpu", "raw": 7.5, "score": 92.5}]}
            ],
            "filtered": [{"reason": "cpu above threshold", "count": 1}],
        }
    )
    ready = Condition.model_validate(
        {
            "type": ConditionType.READY,
            "status": ConditionStatus.TRUE,
            "reason": "Scheduling",
            "lastTransitionTime": now,
        }
    )
    return SchedulingPolicyStatus(
        observed_generation=1,
        conditions=[ready],
        scheduled=7,
        unschedulable=2,
        unschedulable_now=2,
        errors=1,
        last_decision=decision,
        recent_decisions=[decision],
    )


def test_status_subresource_round_trips_and_fills_the_columns(api: Sandbox, new_name: NewName) -> None:
    name = new_name()
    node = api.node_names[0] if api.node_names else "node-0"
    api.kubectl("apply", "--server-side", "-f", "-", input=_manifest(name, SPEC))
    status = _status(node)

    api.kubectl(
        "patch", "schedulingpolicy", name, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status.to_object()}),
    )  # fmt: skip

    assert parse_status(_stored(api, name)["status"]) == status
    header, row = api.kubectl("get", "spol", name).stdout.splitlines()
    assert header.split() == [
        "NAME", "SCHEDULER", "PROMETHEUS", "READY", "SCHEDULED", "FAILED", "LAST-POD", "LAST-NODE", "AGE",
    ]  # fmt: skip
    assert row.split()[:8] == [
        name,
        "promsched",
        "http://127.0.0.1:9090",
        "True",
        "7",
        "2",
        "default/web-1",
        node,
    ]
    wide_header, wide_row = api.kubectl("get", "schedulingpolicies", name, "-o", "wide").stdout.splitlines()
    assert wide_header.split()[-6:] == [
        "MODE",
        "ERRORS",
        "OBSERVED-GEN",
        "GENERATION",
        "REBALANCE",
        "HOT-NODES",
    ]
    # HOT-NODES stays blank while rebalancing is Off: no status.rebalance.
    assert wide_row.split()[-5:] == ["Enforce", "1", "1", "1", "Off"]


def test_status_is_not_writable_through_the_main_resource(api: Sandbox, new_name: NewName) -> None:
    name = new_name()
    api.kubectl("apply", "--server-side", "-f", "-", input=_manifest(name, SPEC))

    api.kubectl(
        "patch", "schedulingpolicy", name, "--type=merge", "-p", json.dumps({"status": {"scheduled": 5}})
    )

    assert "status" not in _stored(api, name)


def test_explain_documents_the_plugin_fields(api: Sandbox) -> None:
    # The API server publishes a new CRD's OpenAPI a little after it is established.
    _eventually(
        lambda: api.kubectl("explain", "schedulingpolicy.spec.plugins", check=False).returncode == 0,
        "kubectl explain schedulingpolicy.spec.plugins",
    )

    text = api.kubectl("explain", "schedulingpolicy.spec.plugins").stdout

    for field in [
        "name",
        "weight",
        "timeRange",
        "threshold",
        "devices",
        "devicePattern",
        "mountpoint",
        "query",
    ]:
        assert f"{field}\t" in text or f"{field} " in text, f"{field} missing from:\n{text}"
    assert "any other name is a custom plugin and must set query" in " ".join(text.split())
    normalization = api.kubectl("explain", "schedulingpolicy.spec.plugins.normalization.type").stdout
    assert "Absolute" in normalization


def test_converted_original_configuration_applies(api: Sandbox, new_name: NewName) -> None:
    (policy,) = convert_file(EXAMPLES / "original-scheduler-config.yaml").policies
    name = new_name()

    api.kubectl("apply", "--server-side", "-f", "-", input=_manifest(name, policy["spec"]))

    assert _stored(api, name)["spec"] == SchedulingPolicySpec.model_validate(policy["spec"]).to_object()
