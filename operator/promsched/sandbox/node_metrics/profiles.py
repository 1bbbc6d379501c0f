"""Load profiles of simulated nodes: what each node's metrics say about it.

A profiles file (YAML) sets them per node and may give nodes labels and taints:

    default: {cpu: 20, memory: 30}
    nodes:
      node-0: {cpu: 85, memory: 70, diskBusy: 10, diskUsed: 50, network: 5e6}
      node-1: {cpu: 5, taints: [{key: dedicated, value: gpu, effect: NoSchedule}], labels: {gpu: "true"}}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PERCENT_FIELDS = ("cpu", "memory", "disk_busy", "disk_used")
# YAML and CLI spellings of the profile fields.
FIELD_ALIASES = {
    "cpu": "cpu",
    "memory": "memory",
    "diskBusy": "disk_busy",
    "disk_busy": "disk_busy",
    "diskUsed": "disk_used",
    "disk_used": "disk_used",
    "network": "network",
}
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class ProfileError(ValueError):
    """A profile or profiles file is invalid; the message names the field."""


@dataclass(frozen=True)
class LoadProfile:
    """Percentages are 0-100; network is receive+transmit bytes per second on eth0."""

    cpu: float = 20.0
    memory: float = 30.0
    disk_busy: float = 5.0
    disk_used: float = 40.0
    network: float = 1_000_000.0

    def updated(self, values: Mapping[str, Any], where: str = "profile") -> LoadProfile:
        changes: dict[str, float] = {}
        for key, raw in values.items():
            name = FIELD_ALIASES.get(key)
            if name is None:
                raise ProfileError(
                    f"{where}.{key}: unknown field; use one of cpu, memory, diskBusy, diskUsed, network"
                )
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise ProfileError(f"{where}.{key}: {raw!r} is not a number") from None
            if name in PERCENT_FIELDS and not 0.0 <= value <= 100.0:
                raise ProfileError(f"{where}.{key}: {value} is not a percentage between 0 and 100")
            if value < 0:
                raise ProfileError(f"{where}.{key}: {value} must not be negative")
            changes[name] = value
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class NodeSetup:
    load: LoadProfile
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)


def _taints(raw: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(raw, list):
        raise ProfileError(f"{where}.taints: expected a list of {{key, value, effect}}")
    taints = []
    for index, taint in enumerate(raw):
        if not isinstance(taint, dict) or "key" not in taint or taint.get("effect") not in TAINT_EFFECTS:
            raise ProfileError(
                f"{where}.taints[{index}]: needs a key and an effect among {', '.join(TAINT_EFFECTS)}"
            )
        taints.append({k: str(v) for k, v in taint.items() if k in ("key", "value", "effect")})
    return taints


def parse_profiles(document: Any, node_names: list[str]) -> dict[str, NodeSetup]:
    """Every node gets a setup: its own entry over the file's `default` over the built-in default."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ProfileError("profiles file: expected a mapping with `default` and `nodes`")
    unknown = set(document) - {"default", "nodes"}
    if unknown:
        raise ProfileError(
            f"profiles file: unknown key(s) {', '.join(sorted(unknown))}; use `default` and `nodes`"
        )
    default = LoadProfile().updated(document.get("default") or {}, "default")
    nodes = document.get("nodes") or {}
    if not isinstance(nodes, dict):
        raise ProfileError("nodes: expected a mapping of node name to profile")
    strangers = set(nodes) - set(node_names)
    if strangers:
        raise ProfileError(
            f"nodes: {', '.join(sorted(strangers))} not in the sandbox "
            f"(nodes are {node_names[0]}..{node_names[-1]}); raise --nodes or rename the entries"
        )
    setups = {}
    for name in node_names:
        entry = dict(nodes.get(name) or {})
        where = f"nodes.{name}"
        labels = entry.pop("labels", {}) or {}
        if not isinstance(labels, dict):
            raise ProfileError(f"{where}.labels: expected a mapping of label to value")
        taints = _taints(entry.pop("taints"), where) if "taints" in entry else []
        setups[name] = NodeSetup(
            default.updated(entry, where), {str(k): str(v) for k, v in labels.items()}, taints
        )
    return setups


def load_profiles_file(path: Path, node_names: list[str]) -> dict[str, NodeSetup]:
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ProfileError(f"{path}: {error}") from None
    return parse_profiles(document, node_names)
