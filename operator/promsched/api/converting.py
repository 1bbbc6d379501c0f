"""Convert a KubeSchedulerConfiguration that used the original Go plugins into SchedulingPolicies.

The original plugins (cputraffic, memorytraffic, disktraffic, diskspacetraffic, networktraffic) were
score plugins configured per profile with `pluginConfig` args `ip`, `devicename` and `timerange`
(minutes). Each profile that enables at least one of them becomes one SchedulingPolicy.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from promsched.api.builtins import BuiltinPlugin
from promsched.api.fields import PolicyError
from promsched.api.policies import API_VERSION, KIND, SchedulingPolicy

SCHEDULER_CONFIG_GROUP = "kubescheduler.config.k8s.io"
SCHEDULER_CONFIG_VERSIONS = ("v1beta1", "v1beta2", "v1beta3", "v1")
DEFAULT_SCHEDULER_NAME = "default-scheduler"

ORIGINAL_PLUGINS: dict[str, BuiltinPlugin] = {
    "cputraffic": BuiltinPlugin.CPU,
    "memorytraffic": BuiltinPlugin.MEMORY,
    "disktraffic": BuiltinPlugin.DISK_IO,
    "diskspacetraffic": BuiltinPlugin.DISK_SPACE,
    "networktraffic": BuiltinPlugin.NETWORK,
}
_ORIGINAL_ARGS = ("ip", "devicename", "timerange")
# memorytraffic averaged over a hard-coded 30 minutes whatever its timerange said.
_MEMORY_WINDOW = "30m"
_SCORE_POINTS = ("score", "multiPoint")
# kube-scheduler treats an unset (or 0) score weight as 1.
_DEFAULT_WEIGHT = 1


class ConversionError(ValueError):
    """The input cannot be converted; the message says what is wrong and how to fix it."""


@dataclass(frozen=True)
class ConversionResult:
    policies: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _EnabledPlugin:
    name: str
    weight: int
    extension_point: str


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConversionError(f"{where} must be a mapping, not {type(value).__name__}")
    return value


def _sequence(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConversionError(f"{where} must be a list, not {type(value).__name__}")
    return value


def _scheduler_configuration(text: str) -> Mapping[str, Any]:
    try:
        documents = [document for document in yaml.safe_load_all(text) if document is not None]
    except yaml.YAMLError as error:
        raise ConversionError(f"not valid YAML: {error}") from None
    valid_versions = ", ".join(f"{SCHEDULER_CONFIG_GROUP}/{version}" for version in SCHEDULER_CONFIG_VERSIONS)
    configurations = [
        document
        for document in documents
        if isinstance(document, Mapping) and document.get("kind") == "KubeSchedulerConfiguration"
    ]
    if len(configurations) != 1:
        raise ConversionError(
            f"expected one KubeSchedulerConfiguration document, found {len(configurations)}; "
            f"give a file with kind: KubeSchedulerConfiguration and apiVersion one of {valid_versions}"
        )
    configuration = configurations[0]
    api_version = configuration.get("apiVersion")
    group, _, version = str(api_version).partition("/")
    if group != SCHEDULER_CONFIG_GROUP or version not in SCHEDULER_CONFIG_VERSIONS:
        raise ConversionError(f"apiVersion {api_version!r} is not supported; use one of {valid_versions}")
    return configuration


def _enabled_plugins(profile: Mapping[str, Any], where: str) -> list[_EnabledPlugin]:
    extension_points = _mapping(profile.get("plugins"), f"{where}.plugins")
    enabled = []
    for point, settings in extension_points.items():
        where_point = f"{where}.plugins.{point}"
        entries = _sequence(_mapping(settings, where_point).get("enabled"), f"{where_point}.enabled")
        for index, entry in enumerate(entries):
            entry_map = _mapping(entry, f"{where_point}.enabled[{index}]")
            weight = entry_map.get("weight") or _DEFAULT_WEIGHT
            if not isinstance(weight, int):
                raise ConversionError(f"{where_point}.enabled[{index}].weight must be an integer")
            enabled.append(_EnabledPlugin(str(entry_map.get("name")), weight, point))
    return enabled


def _plugin_args(profile: Mapping[str, Any], where: str, warnings: list[str]) -> dict[str, Mapping[str, Any]]:
    args_by_plugin = {}
    for index, entry in enumerate(_sequence(profile.get("pluginConfig"), f"{where}.pluginConfig")):
        entry_map = _mapping(entry, f"{where}.pluginConfig[{index}]")
        name = str(entry_map.get("name"))
        args = _mapping(entry_map.get("args"), f"{where}.pluginConfig[{index}].args")
        if name not in ORIGINAL_PLUGINS:
            warnings.append(
                f"{where}: pluginConfig for {name} has no promsched equivalent and is not carried over"
            )
            continue
        unknown = sorted(set(args) - set(_ORIGINAL_ARGS))
        if unknown:
            warnings.append(f"{where}: {name} args {', '.join(unknown)} are not known and are ignored")
        args_by_plugin[name] = args
    return args_by_plugin


def _prometheus_url(ip: Any, where: str) -> str:
    address = str(ip).strip().rstrip("/")
    if not address:
        raise ConversionError(
            f"{where}: args.ip is empty; set it to the Prometheus address, e.g. http://10.0.0.1:9090"
        )
    return address if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", address) else f"http://{address}"


def _time_range(minutes: Any, where: str) -> str:
    if isinstance(minutes, bool) or not isinstance(minutes, int) or minutes < 0:
        raise ConversionError(
            f"{where}: args.timerange must be a whole number of minutes >= 0, not {minutes!r}"
        )
    return f"{minutes}m" if minutes else "0s"


def _convert_profile(profile: Mapping[str, Any], where: str, warnings: list[str]) -> dict[str, Any] | None:
    scheduler_name = str(profile.get("schedulerName") or DEFAULT_SCHEDULER_NAME)
    where = f"{where} ({scheduler_name})"
    # By name: a plugin enabled both at multiPoint and at score is converted once, with its score weight.
    original: dict[str, _EnabledPlugin] = {}
    for plugin in _enabled_plugins(profile, where):
        if plugin.name not in ORIGINAL_PLUGINS:
            warnings.append(
                f"{where}: plugin {plugin.name} ({plugin.extension_point}) has no promsched equivalent "
                "and is not carried over"
            )
        elif plugin.extension_point in _SCORE_POINTS:
            if plugin.name not in original or plugin.extension_point == "score":
                original[plugin.name] = plugin
        else:
            warnings.append(
                f"{where}: {plugin.name} is enabled at {plugin.extension_point}, but it was only a score "
                "plugin; that entry is ignored"
            )
    args_by_plugin = _plugin_args(profile, where, warnings)
    if not original:
        warnings.append(f"{where}: uses none of the original plugins; no policy is made for it")
        return None

    for name in sorted(set(args_by_plugin) - set(original)):
        warnings.append(f"{where}: pluginConfig for {name} is unused because {name} is not enabled")
    urls = {
        name: _prometheus_url(args_by_plugin[name]["ip"], f"{where} {name}")
        for name in original
        if args_by_plugin.get(name, {}).get("ip") is not None
    }
    if len(set(urls.values())) > 1:
        listing = ", ".join(f"{name}: {url}" for name, url in sorted(urls.items()))
        raise ConversionError(
            f"{where}: the plugins point at different Prometheus servers ({listing}); "
            "a SchedulingPolicy has one, so give every plugin the same args.ip"
        )
    if not urls:
        raise ConversionError(
            f"{where}: no pluginConfig gives args.ip, so the Prometheus address is unknown; "
            "add args.ip (e.g. http://10.0.0.1:9090) to one of the plugins"
        )

    plugins = []
    for enabled_plugin in original.values():
        args = args_by_plugin.get(enabled_plugin.name, {})
        builtin = ORIGINAL_PLUGINS[enabled_plugin.name]
        converted: dict[str, Any] = {
            "name": builtin.value,
            "weight": enabled_plugin.weight,
            "timeRange": _time_range(args.get("timerange", 0), f"{where} {enabled_plugin.name}"),
        }
        if builtin == BuiltinPlugin.MEMORY:
            warnings.append(
                f"{where}: memorytraffic ignored its timerange and always averaged over 30 minutes; "
                f"the policy keeps that with timeRange {_MEMORY_WINDOW}"
            )
            converted["timeRange"] = _MEMORY_WINDOW
        if builtin == BuiltinPlugin.NETWORK:
            if args.get("devicename"):
                converted["devices"] = [str(args["devicename"])]
            else:
                warnings.append(
                    f"{where}: networktraffic has no args.devicename; promsched's default devices apply"
                )
        plugins.append(converted)

    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": scheduler_name},
        "spec": {
            "schedulerName": scheduler_name,
            "prometheus": {"url": next(iter(urls.values()))},
            "plugins": plugins,
        },
    }


def _validate(policy: Mapping[str, Any]) -> None:
    try:
        SchedulingPolicy.from_object(policy)
    except PolicyError as error:
        raise ConversionError(
            f"the converted policy {policy['metadata']['name']} is not valid:\n{error}"
        ) from None


def convert_scheduler_config(text: str) -> ConversionResult:
    """SchedulingPolicies (as dicts) for the profiles of a KubeSchedulerConfiguration that use the
    original plugins, with warnings about everything not carried over."""
    configuration = _scheduler_configuration(text)
    warnings: list[str] = []
    policies = []
    for index, profile in enumerate(_sequence(configuration.get("profiles"), "profiles")):
        policy = _convert_profile(_mapping(profile, f"profiles[{index}]"), f"profiles[{index}]", warnings)
        if policy is not None:
            policies.append(policy)
    if not policies:
        raise ConversionError(
            f"no profile enables any of the original plugins ({', '.join(ORIGINAL_PLUGINS)}) "
            "at score or multiPoint; nothing to convert"
        )
    for policy in policies:
        _validate(policy)
    warnings.append(
        "the original failed a pod's scheduling cycle when a query returned no sample; the policies use "
        "onMissingMetrics: Neutral (score 50); set it to Unschedulable to keep the old behaviour"
    )
    return ConversionResult(policies=policies, warnings=warnings)


def convert_file(path: str | os.PathLike[str]) -> ConversionResult:
    """convert_scheduler_config on the contents of a file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConversionError(f"cannot read {path}: {error.strerror}") from None
    return convert_scheduler_config(text)
