"""spec.rebalance: defaults, and errors that name the field and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.api.fields import PolicyError
from promsched.api.rebalances import RebalanceMode
from support.policies import policy_spec

CUSTOM = {"name": "freeSlots", "query": "slots_free", "higherIsBetter": True}


def rebalance(**fields: Any) -> dict[str, Any]:
    return {
        "mode": "DryRun",
        "thresholds": [{"plugin": "cpu", "hotThreshold": 85, "targetThreshold": 70}],
        **fields,
    }


def test_off_by_default_with_safe_limits() -> None:
    spec = policy_spec()
    assert spec.rebalance.mode is RebalanceMode.OFF
    assert spec.rebalance.thresholds == []
    assert spec.rebalance.limits.max_evictions_per_node == 1
    assert spec.rebalance.pods.allow_local_storage is False
    assert spec.rebalance.sustained_seconds == 300
    assert spec.rebalance.min_pod_age_seconds == 600


def test_a_valid_rebalance_parses() -> None:
    spec = policy_spec(
        rebalance=rebalance(sustainedFor="6m", pods={"selector": {"matchLabels": {"app": "web"}}})
    )
    assert spec.rebalance.mode is RebalanceMode.DRY_RUN
    assert spec.rebalance.thresholds[0].hot_threshold == 85
    assert spec.rebalance.sustained_seconds == 360


@pytest.mark.parametrize(
    ("document", "plugins", "message"),
    [
        ({"mode": "Enforce"}, (), "spec.rebalance: thresholds: required when mode is Enforce"),
        (
            rebalance(thresholds=[{"plugin": "memory", "hotThreshold": 90, "targetThreshold": 80}]),
            (),
            "rebalance.thresholds[0].plugin: 'memory' is not in spec.plugins",
        ),
        (
            rebalance(thresholds=[{"plugin": "cpu", "hotThreshold": 70, "targetThreshold": 85}]),
            (),
            "rebalance.thresholds[0].targetThreshold: must be below hotThreshold (70)",
        ),
        (
            rebalance(thresholds=[{"plugin": "cpu", "hotThreshold": 120, "targetThreshold": 85}]),
            (),
            "rebalance.thresholds[0].hotThreshold: plugin 'cpu' is a percentage, 0..100",
        ),
        (
            rebalance(thresholds=[{"plugin": "freeSlots", "hotThreshold": 5, "targetThreshold": 2}]),
            ({"name": "cpu"}, CUSTOM),
            "targetThreshold: must be above hotThreshold (5) for plugin 'freeSlots'",
        ),
        (rebalance(interval="5s"), (), "interval: must be at least 10s"),
        (rebalance(sustainedFor="0s"), (), "sustainedFor: must be longer than 0s"),
        (
            rebalance(thresholds=[{"plugin": "cpu", "hotThreshold": 85, "targetThreshold": 70}] * 2),
            (),
            "thresholds: one entry per plugin; cpu appear",
        ),
        (
            rebalance(pods={"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}),
            (),
            "values: required for operator In",
        ),
        (rebalance(limits={"maxEvictionsPerNode": 0}), (), "spec.rebalance.limits.maxEvictionsPerNode"),
        (rebalance(mode="Always"), (), "spec.rebalance.mode"),
    ],
)
def test_errors_name_the_field_and_the_fix(
    document: dict[str, Any], plugins: tuple[dict[str, Any], ...], message: str
) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_spec(*plugins, rebalance=document)
    assert message in str(raised.value)


def test_a_higher_is_better_plugin_relieves_upwards() -> None:
    spec = policy_spec(
        {"name": "cpu"},
        CUSTOM,
        rebalance=rebalance(thresholds=[{"plugin": "freeSlots", "hotThreshold": 2, "targetThreshold": 5}]),
    )
    assert spec.rebalance.thresholds[0].target_threshold == 5


@pytest.mark.parametrize(
    ("plugins", "threshold", "message"),
    [
        (
            ({"name": "memory"}, {"name": "cpu", "threshold": 80}),
            {"plugin": "cpu", "hotThreshold": 70, "targetThreshold": 60},
            "spec: rebalance.thresholds[0].hotThreshold (70) must be above spec.plugins[1].threshold (80) "
            "of plugin 'cpu': placement would still send pods to a node at 80, which rebalancing counts as "
            "hot and empties again, in a loop; raise hotThreshold or lower threshold",
        ),
        (
            ({"name": "cpu", "threshold": 80},),
            {"plugin": "cpu", "hotThreshold": 80, "targetThreshold": 60},
            "rebalance.thresholds[0].hotThreshold (80) must be above spec.plugins[0].threshold (80)",
        ),
        (
            ({"name": "cpu"}, {**CUSTOM, "threshold": 2}),
            {"plugin": "freeSlots", "hotThreshold": 3, "targetThreshold": 5},
            "rebalance.thresholds[0].hotThreshold (3) must be below spec.plugins[1].threshold (2) of plugin "
            "'freeSlots': placement would still send pods to a node at 2, which rebalancing counts as hot "
            "and empties again, in a loop; lower hotThreshold or raise threshold",
        ),
    ],
)
def test_a_hot_threshold_that_placement_still_fills_is_refused_naming_both_fields(
    plugins: tuple[dict[str, Any], ...], threshold: dict[str, Any], message: str
) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_spec(*plugins, rebalance=rebalance(thresholds=[threshold]))
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("plugins", "threshold"),
    [
        (({"name": "cpu", "threshold": 80},), {"plugin": "cpu", "hotThreshold": 85, "targetThreshold": 70}),
        (
            ({"name": "cpu"},),
            {"plugin": "cpu", "hotThreshold": 50, "targetThreshold": 40},
        ),  # no placement one
        (
            ({"name": "cpu"}, {**CUSTOM, "threshold": 3}),
            {"plugin": "freeSlots", "hotThreshold": 2, "targetThreshold": 5},
        ),
    ],
)
def test_a_hot_threshold_past_the_placement_threshold_is_accepted(
    plugins: tuple[dict[str, Any], ...], threshold: dict[str, Any]
) -> None:
    spec = policy_spec(*plugins, rebalance=rebalance(thresholds=[threshold]))
    assert spec.rebalance.thresholds[0].hot_threshold == threshold["hotThreshold"]
