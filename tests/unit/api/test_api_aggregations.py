"""spec.plugins[].aggregation: avg, max or pNN, for built-ins over a window; errors name the field and the
fix, and the CRD refuses what the models refuse."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.api.crds import render_crd
from promsched.api.fields import PolicyError, aggregation_percentile
from support.policies import policy_spec

PLUGIN_SCHEMA = render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
    "properties"
]["plugins"]["items"]


@pytest.mark.parametrize(
    ("aggregation", "percentile"),
    [(None, None), ("avg", None), ("max", 100), ("p90", 90), ("p1", 1), ("p99", 99), ("p5", 5)],
)
def test_valid_aggregations_parse_to_their_percentile(
    aggregation: str | None, percentile: int | None
) -> None:
    plugin = {"name": "cpu"} if aggregation is None else {"name": "cpu", "aggregation": aggregation}
    [spec] = policy_spec(plugin).plugins
    assert spec.aggregation == aggregation
    assert spec.window_percentile == percentile == aggregation_percentile(aggregation)


@pytest.mark.parametrize("aggregation", ["p101", "p100", "p0", "p05", "P90", "p", "mean", "90", "min", ""])
def test_an_invalid_aggregation_is_refused_naming_the_field_and_the_choices(aggregation: str) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_spec({"name": "memory"}, {"name": "cpu", "aggregation": aggregation})
    assert str(raised.value) == (
        f"spec.plugins[1].aggregation: {aggregation!r} is not a valid aggregation; "
        "use avg, max, or pNN with NN in 1..99, e.g. p90"
    )


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        (
            {"name": "cpu", "timeRange": "0s", "aggregation": "p90"},
            "spec.plugins[0]: aggregation p90 needs a window: timeRange 0s of plugin 'cpu' reads one "
            "instant value; set timeRange (e.g. 5m) or aggregation avg",
        ),
        (
            {"name": "memory", "timeRange": "0s", "aggregation": "max"},
            "aggregation max needs a window: timeRange 0s of plugin 'memory'",
        ),
        (
            {"name": "gpu", "query": "gpu_util", "aggregation": "p90"},
            "spec.plugins[0]: aggregation applies to built-in plugins only; remove it from plugin 'gpu' "
            "(a custom plugin's query says how it aggregates, e.g. with quantile_over_time)",
        ),
    ],
)
def test_an_aggregation_without_a_window_or_on_a_custom_plugin_is_refused(
    plugin: dict[str, Any], message: str
) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_spec(plugin)
    assert message in str(raised.value)


def test_avg_over_an_instant_is_the_instant_value_as_before() -> None:
    [spec] = policy_spec({"name": "cpu", "timeRange": "0s", "aggregation": "avg"}).plugins
    assert (spec.time_range_seconds, spec.window_percentile) == (0, None)


def test_an_unset_aggregation_stays_off_the_wire() -> None:
    """Objects written before aggregation existed read back, and write out, unchanged."""
    assert "aggregation" not in policy_spec({"name": "cpu"}).to_object()["plugins"][0]


def test_the_crd_checks_the_form_and_refuses_what_the_models_refuse() -> None:
    schema = PLUGIN_SCHEMA["properties"]["aggregation"]
    [form] = schema["x-kubernetes-validations"]
    assert form["message"] == "is not a valid aggregation; use avg, max, or pNN with NN in 1..99, e.g. p90"
    rules = {rule["message"]: rule for rule in PLUGIN_SCHEMA["x-kubernetes-validations"]}
    builtins_only = next(rule for message, rule in rules.items() if "aggregation applies to" in message)
    needs_window = next(rule for message, rule in rules.items() if "aggregation max or pNN" in message)
    assert builtins_only["fieldPath"] == needs_window["fieldPath"] == ".aggregation"
    assert "self.aggregation == 'avg'" in needs_window["rule"]
    assert "duration(self.timeRange) > duration('0s')" in needs_window["rule"]
