"""spec.estimation: its defaults, its validation (errors name the field and the fix), its CRD schema."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.api.crds import render_crd
from promsched.api.estimations import Estimation, EstimationSource
from promsched.api.fields import PolicyError
from support.policies import policy_spec

ESTIMATION_SCHEMA = render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
    "properties"
]["estimation"]


def test_the_default_counts_requests_as_before_and_queries_nothing() -> None:
    estimation = policy_spec().estimation
    assert estimation == Estimation()
    assert estimation.source is EstimationSource.REQUESTS
    assert not estimation.queries_usage
    assert estimation.to_object() == {
        "source": "Requests",
        "percentile": 90,
        "window": "5m",
        "fallback": {"cpuFactor": 1.0, "memoryFactor": 1.0, "useLimits": False},
        "unrequested": {"cpu": "250m", "memory": "200Mi"},
    }


def test_siblings_read_usage_over_the_window() -> None:
    estimation = policy_spec(estimation={"source": "Siblings", "window": "10m", "percentile": 95}).estimation
    assert estimation.queries_usage
    assert (estimation.window_seconds, estimation.percentile) == (600, 95)


@pytest.mark.parametrize(
    ("estimation", "message"),
    [
        ({"percentile": 0}, "spec.estimation.percentile: Input should be greater than or equal to 1"),
        ({"percentile": 101}, "spec.estimation.percentile: Input should be less than or equal to 100"),
        ({"window": "0s"}, "spec.estimation: window must be longer than 0s, e.g. window: 5m"),
        ({"window": "5"}, "spec.estimation.window: '5' must be a Go duration, e.g. 500ms"),
        ({"source": "Usage"}, "spec.estimation.source: Input should be 'Siblings' or 'Requests'"),
        ({"fallback": {"cpuFactor": -1}}, "spec.estimation.fallback.cpuFactor: Input should be greater"),
        ({"fallback": {"memoryFactor": 11}}, "spec.estimation.fallback.memoryFactor: Input should be less"),
        ({"unrequested": {"memory": "lots"}}, "spec.estimation.unrequested.memory: must be a Kubernetes"),
        ({"unrequested": {"cpu": "-1"}}, "spec.estimation.unrequested.cpu: must be a Kubernetes quantity"),
        ({"percentil": 90}, "spec.estimation.percentil: unknown field; remove it or fix its spelling"),
    ],
)
def test_bad_settings_name_the_field_and_the_fix(estimation: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_spec(estimation=estimation)
    assert message in str(raised.value)


def test_the_crd_carries_the_defaults_and_rules() -> None:
    properties = ESTIMATION_SCHEMA["properties"]
    assert properties["source"]["enum"] == ["Siblings", "Requests"]
    assert (properties["percentile"]["minimum"], properties["percentile"]["maximum"]) == (1, 100)
    assert ESTIMATION_SCHEMA["default"]["source"] == "Requests"
    [window_rule] = [
        rule for rule in ESTIMATION_SCHEMA["x-kubernetes-validations"] if "window" in rule["rule"]
    ]
    assert window_rule["message"] == "spec.estimation.window must be longer than 0s; e.g. window: 5m"
    quantity_rules = properties["unrequested"]["properties"]["cpu"]["x-kubernetes-validations"]
    assert quantity_rules[0]["message"] == "must be a Kubernetes quantity such as 250m, 1.5, 200Mi or 1G"
