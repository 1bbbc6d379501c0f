"""Converting the original plugins' KubeSchedulerConfiguration into SchedulingPolicies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from promsched.api.converting import ConversionError, convert_file, convert_scheduler_config
from promsched.api.policies import SchedulingPolicy

EXAMPLES = Path(__file__).parents[3] / "examples"


def _config(profiles: list[dict[str, Any]], api_version: str = "kubescheduler.config.k8s.io/v1") -> str:
    return yaml.safe_dump(
        {"apiVersion": api_version, "kind": "KubeSchedulerConfiguration", "profiles": profiles}
    )


def _profile(
    enabled: list[dict[str, Any]], args: dict[str, dict[str, Any]], name: str = "custom-scheduler"
) -> dict[str, Any]:
    return {
        "schedulerName": name,
        "plugins": {"score": {"enabled": enabled, "disabled": [{"name": "*"}]}},
        "pluginConfig": [{"name": plugin, "args": plugin_args} for plugin, plugin_args in args.items()],
    }


PROMETHEUS = {"ip": "10.0.0.5:9090", "devicename": "eth0", "timerange": 0}


def test_the_original_configuration_becomes_the_original_profile() -> None:
    result = convert_file(EXAMPLES / "original-scheduler-config.yaml")
    expected = yaml.safe_load((EXAMPLES / "original-profile.yaml").read_text())

    assert [policy["spec"] for policy in result.policies] == [expected["spec"]]
    assert result.policies[0]["metadata"] == {"name": "custom-scheduler"}
    assert any("memorytraffic ignored its timerange" in warning for warning in result.warnings)
    SchedulingPolicy.from_object(result.policies[0])


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2", "v1beta3", "v1"])
def test_every_scheduler_config_version_is_read(version: str) -> None:
    text = _config(
        [_profile([{"name": "cputraffic", "weight": 2}], {"cputraffic": PROMETHEUS})],
        f"kubescheduler.config.k8s.io/{version}",
    )

    (policy,) = convert_scheduler_config(text).policies

    assert policy["spec"]["prometheus"] == {"url": "http://10.0.0.5:9090"}
    assert policy["spec"]["plugins"] == [{"name": "cpu", "weight": 2, "timeRange": "0s"}]


def test_all_five_plugins_map_to_builtins() -> None:
    originals = ["cputraffic", "memorytraffic", "disktraffic", "diskspacetraffic", "networktraffic"]
    text = _config(
        [
            _profile(
                [{"name": name, "weight": index + 1} for index, name in enumerate(originals)],
                {name: {**PROMETHEUS, "timerange": 10} for name in originals},
            )
        ]
    )

    (policy,) = convert_scheduler_config(text).policies

    assert policy["spec"]["plugins"] == [
        {"name": "cpu", "weight": 1, "timeRange": "10m"},
        {"name": "memory", "weight": 2, "timeRange": "30m"},
        {"name": "diskIO", "weight": 3, "timeRange": "10m"},
        {"name": "diskSpace", "weight": 4, "timeRange": "10m"},
        {"name": "network", "weight": 5, "timeRange": "10m", "devices": ["eth0"]},
    ]


def test_multipoint_plugins_count_and_unset_weight_is_one() -> None:
    profile = {
        "schedulerName": "multi",
        "plugins": {"multiPoint": {"enabled": [{"name": "cputraffic"}]}},
        "pluginConfig": [{"name": "cputraffic", "args": PROMETHEUS}],
    }

    (policy,) = convert_scheduler_config(_config([profile])).policies

    assert policy["spec"]["plugins"] == [{"name": "cpu", "weight": 1, "timeRange": "0s"}]


def test_unknown_plugins_are_reported_not_dropped_silently() -> None:
    profile = _profile(
        [{"name": "cputraffic", "weight": 3}, {"name": "NodeResourcesBalancedAllocation", "weight": 1}],
        {"cputraffic": PROMETHEUS, "NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated"}}},
    )

    result = convert_scheduler_config(_config([profile]))

    assert [plugin["name"] for plugin in result.policies[0]["spec"]["plugins"]] == ["cpu"]
    assert any(
        "NodeResourcesBalancedAllocation (score) has no promsched equivalent" in w for w in result.warnings
    )
    assert any("pluginConfig for NodeResourcesFit" in warning for warning in result.warnings)


def test_profiles_without_original_plugins_are_skipped_with_a_warning() -> None:
    plain = {"schedulerName": "default-scheduler"}
    custom = _profile([{"name": "networktraffic", "weight": 2}], {"networktraffic": PROMETHEUS})

    result = convert_scheduler_config(_config([plain, custom]))

    assert [policy["metadata"]["name"] for policy in result.policies] == ["custom-scheduler"]
    assert any("(default-scheduler): uses none of the original plugins" in w for w in result.warnings)


def test_differing_prometheus_addresses_are_an_error() -> None:
    profile = _profile(
        [{"name": "cputraffic", "weight": 3}, {"name": "memorytraffic", "weight": 4}],
        {"cputraffic": PROMETHEUS, "memorytraffic": {**PROMETHEUS, "ip": "http://10.0.0.6:9090"}},
    )

    with pytest.raises(
        ConversionError, match=r"different Prometheus servers .*give every plugin the same args\.ip"
    ):
        convert_scheduler_config(_config([profile]))


def test_a_configuration_without_the_original_plugins_is_an_error() -> None:
    profile = {"schedulerName": "x", "plugins": {"score": {"enabled": [{"name": "ImageLocality"}]}}}

    with pytest.raises(ConversionError, match="no profile enables any of the original plugins"):
        convert_scheduler_config(_config([profile]))


def test_a_missing_prometheus_address_is_an_error() -> None:
    profile = _profile([{"name": "cputraffic", "weight": 3}], {"cputraffic": {"timerange": 0}})

    with pytest.raises(ConversionError, match=r"no pluginConfig gives args\.ip"):
        convert_scheduler_config(_config([profile]))


@pytest.mark.parametrize("minutes", [-1, "5m", 1.5, True])
def test_a_bad_timerange_is_an_error(minutes: Any) -> None:
    profile = _profile(
        [{"name": "cputraffic", "weight": 3}], {"cputraffic": {**PROMETHEUS, "timerange": minutes}}
    )

    with pytest.raises(ConversionError, match=r"args\.timerange must be a whole number of minutes"):
        convert_scheduler_config(_config([profile]))


def test_a_weight_over_100_fails_validation_naming_the_field() -> None:
    profile = _profile([{"name": "cputraffic", "weight": 300}], {"cputraffic": PROMETHEUS})

    with pytest.raises(
        ConversionError, match=r"spec\.plugins\[0\]\.weight: Input should be less than or equal to 100"
    ):
        convert_scheduler_config(_config([profile]))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Pod\n", "expected one KubeSchedulerConfiguration document, found 0"),
        ("a: [b\n", "not valid YAML"),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1alpha1\nkind: KubeSchedulerConfiguration\n",
            "not supported",
        ),
        (_config([{"schedulerName": "x", "plugins": []}]), "plugins must be a mapping"),
    ],
)
def test_malformed_input_is_an_error(text: str, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        convert_scheduler_config(text)


def test_convert_file_reports_an_unreadable_path(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match="cannot read"):
        convert_file(tmp_path / "missing.yaml")


def test_config_of_a_plugin_that_is_not_enabled_is_reported_and_ignored() -> None:
    profile = _profile(
        [{"name": "cputraffic", "weight": 3}],
        {"cputraffic": PROMETHEUS, "disktraffic": {**PROMETHEUS, "ip": "http://elsewhere:9090"}},
    )

    result = convert_scheduler_config(_config([profile]))

    assert result.policies[0]["spec"]["prometheus"] == {"url": "http://10.0.0.5:9090"}
    assert any("pluginConfig for disktraffic is unused" in warning for warning in result.warnings)
