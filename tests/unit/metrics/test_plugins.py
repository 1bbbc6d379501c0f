"""Plugin scores: absolute for percentages, relative only for unbounded values; thresholds."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.api.builtins import DEFAULT_NETWORK_DEVICE_EXCLUDE_PATTERN
from promsched.api.plugin_specs import PluginSpec
from promsched.api.policies import NodeIdentitySource
from promsched.metrics import NodeIdentity, Series, promql
from promsched.metrics.plugins import ALL_EQUAL_SCORE, BUILTIN_PLUGINS, Plugin, build_plugin
from promsched.metrics.plugins.custom import CustomPlugin

UNAME = NodeIdentity(NodeIdentitySource.UNAME_NODENAME)


def plugin(**settings: Any) -> Plugin:
    return build_plugin(PluginSpec.model_validate(settings), UNAME)


def scores(p: Plugin, values: dict[str, float], labels: dict[str, str] | None = None) -> dict[str, float]:
    series = {node: Series(dict(labels or {}), value, 1.0) for node, value in values.items()}
    return {node: sample.score for node, sample in p.samples(series).items()}


def test_registry() -> None:
    assert sorted(BUILTIN_PLUGINS) == ["cpu", "diskIO", "diskSpace", "memory", "network"]
    for name, plugin_class in BUILTIN_PLUGINS.items():
        assert type(plugin(name=name)) is plugin_class
    assert type(plugin(name="gpu", query="x")) is CustomPlugin


@pytest.mark.parametrize("name", ["cpu", "memory", "diskIO", "diskSpace"])
def test_percent_loads_score_absolutely(name: str) -> None:
    # The original plugins' score*100/highest made 1% vs 2% CPU into 50 vs 100.
    assert scores(plugin(name=name), {"a": 1, "b": 2}) == {"a": 99, "b": 98}
    assert scores(plugin(name=name), {"a": 0, "b": 0}) == {"a": 100, "b": 100}
    assert scores(plugin(name=name), {"a": 103, "b": -1}) == {"a": 0, "b": 100}


def test_threshold_filters_above_the_load() -> None:
    cpu = plugin(name="cpu", threshold=85)
    samples = cpu.samples({"a": Series({}, 91.2, 1.0), "b": Series({}, 85, 1.0)})
    assert (samples["a"].over_threshold, samples["b"].over_threshold) == (True, False)
    assert cpu.threshold_reason == "cpu load above 85%"
    assert cpu.describe(91.2) == "cpu load 91%"


def test_no_threshold_filters_nothing() -> None:
    samples = plugin(name="memory").samples({"a": Series({}, 100, 1.0)})
    assert not samples["a"].over_threshold


def test_instant_counters_use_a_short_window() -> None:
    assert "[1m]" in plugin(name="cpu", timeRange="0s").query
    assert "[5m]" in plugin(name="cpu", timeRange="5m").query
    assert "[90s]" in plugin(name="network", timeRange="90s").query
    assert "avg_over_time" not in plugin(name="memory", timeRange="0s").query
    assert (
        "avg_over_time(node_memory_MemAvailable_bytes[10m])" in plugin(name="memory", timeRange="10m").query
    )


def test_builtin_defaults() -> None:
    assert 'device=~"sd[a-z]+|nvme[0-9]+n[0-9]+|vd[a-z]+|xvd[a-z]+"' in plugin(name="diskIO").query
    assert 'mountpoint="/"' in plugin(name="diskSpace").query
    assert f"device!~{promql.quote(DEFAULT_NETWORK_DEVICE_EXCLUDE_PATTERN)}" in plugin(name="network").query
    assert 'device!~""' in plugin(name="network", deviceExcludePattern="").query


def test_network_scores_percent_of_link_absolutely_and_bytes_relatively() -> None:
    network = plugin(name="network", threshold=50)
    series = {
        "fast": Series({"promsched_unit": "percent"}, 60, 1.0),
        "slow": Series({"promsched_unit": "percent"}, 10, 1.0),
        "a": Series({"promsched_unit": "bytes_per_second"}, 1000, 1.0),
        "b": Series({"promsched_unit": "bytes_per_second"}, 3000, 1.0),
        "c": Series({"promsched_unit": "bytes_per_second"}, 2000, 1.0),
    }
    samples = network.samples(series)
    assert {node: sample.score for node, sample in samples.items()} == {
        "fast": 40,
        "slow": 90,
        "a": 100,
        "b": 0,
        "c": 50,
    }
    assert [node for node, sample in samples.items() if sample.over_threshold] == ["fast"]


def test_network_bytes_all_equal() -> None:
    labels = {"promsched_unit": "bytes_per_second"}
    assert scores(plugin(name="network"), {"a": 0, "b": 0}, labels) == {
        "a": ALL_EQUAL_SCORE,
        "b": ALL_EQUAL_SCORE,
    }


@pytest.mark.parametrize(
    ("higher_is_better", "expected"),
    [(False, {"low": 100, "mid": 50, "high": 0}), (True, {"low": 0, "mid": 50, "high": 100})],
)
def test_custom_relative(higher_is_better: bool, expected: dict[str, float]) -> None:
    custom = plugin(name="gpu", query="x", higherIsBetter=higher_is_better)
    assert scores(custom, {"low": 10, "mid": 20, "high": 30}) == expected


def test_custom_relative_all_equal_and_single() -> None:
    custom = plugin(name="gpu", query="x")
    assert scores(custom, {"a": 0, "b": 0}) == {"a": ALL_EQUAL_SCORE, "b": ALL_EQUAL_SCORE}
    assert scores(custom, {"a": 5}) == {"a": ALL_EQUAL_SCORE}
    assert scores(custom, {}) == {}


@pytest.mark.parametrize(
    ("higher_is_better", "expected"),
    [(False, {"a": 100, "b": 75, "c": 0}), (True, {"a": 0, "b": 25, "c": 100})],
)
def test_custom_absolute_is_clamped(higher_is_better: bool, expected: dict[str, float]) -> None:
    custom = plugin(
        name="gpu",
        query="x",
        higherIsBetter=higher_is_better,
        normalization={"type": "Absolute", "min": 0, "max": 80},
    )
    assert scores(custom, {"a": -5, "b": 20, "c": 400}) == expected


@pytest.mark.parametrize(
    ("higher_is_better", "filtered", "reason"),
    [(False, ["high"], "gpu above 20"), (True, ["low"], "gpu below 20")],
)
def test_custom_threshold_is_on_the_worse_side(
    higher_is_better: bool, filtered: list[str], reason: str
) -> None:
    custom = plugin(name="gpu", query="x", higherIsBetter=higher_is_better, threshold=20)
    samples = custom.samples({n: Series({}, v, 1.0) for n, v in {"low": 10, "edge": 20, "high": 30}.items()})
    assert [node for node, sample in samples.items() if sample.over_threshold] == filtered
    assert custom.threshold_reason == reason
    assert custom.describe(30) == "gpu 30"


def test_custom_query_uses_the_policy_identity_unless_it_names_a_label() -> None:
    by_policy = plugin(name="gpu", query="avg by (instance) (g)")
    assert by_policy.query == "avg by (instance) (g)"
    assert by_policy.identity == UNAME
    by_label = plugin(name="gpu", query="avg by (Hostname) (g)", nodeLabel="Hostname")
    assert by_label.query == "avg by (Hostname) (g)"
    assert by_label.identity == NodeIdentity(NodeIdentitySource.LABEL, "Hostname")


def test_extra_load_applies_to_percent_samples_only() -> None:
    network = plugin(name="network")
    samples = network.samples(
        {
            "linked": Series({"promsched_unit": "percent"}, 30, 1.0),
            "unlinked": Series({"promsched_unit": "bytes_per_second"}, 5000, 1.0),
        }
    )
    assert network.with_extra_load(samples["linked"], 20).score == 50
    assert network.with_extra_load(samples["unlinked"], 20) == samples["unlinked"]


@pytest.mark.parametrize(
    ("settings", "changed"),
    [
        ({"name": "cpu"}, {"threshold": 50}),
        ({"name": "network"}, {"threshold": 30, "weight": 5}),
        ({"name": "gpu", "query": "x"}, {"threshold": 15}),
    ],
    ids=["load", "network", "custom"],
)
def test_kept_samples_rescored_under_changed_settings_score_as_their_series_would(
    settings: dict[str, Any], changed: dict[str, Any]
) -> None:
    # A snapshot keeps samples, not the series they came from: network's unit is read from its sample.
    series = {
        "linked-busy": Series({"promsched_unit": "percent"}, 60, 1.0),
        "linked-idle": Series({"promsched_unit": "percent"}, 10, 2.0),
        "unlinked-a": Series({"promsched_unit": "bytes_per_second"}, 1000, 3.0),
        "unlinked-b": Series({"promsched_unit": "bytes_per_second"}, 20, 4.0),
    }
    kept = plugin(**settings).samples(series)
    new = plugin(**settings, **changed)

    assert new.rescored(kept) == new.samples(series)
    assert new.rescored(kept) != kept
