"""Nodes as the scheduler sees them (`NodeInfo`), parsed once per object."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from promsched.scheduling.objects.fields import FieldError, list_field, object_field
from promsched.scheduling.objects.resources import (
    PODS,
    ZERO_RESOURCES,
    Resources,
    parse_quantity,
    resources_from_list,
)

NO_SCHEDULE: Final = "NoSchedule"
NO_EXECUTE: Final = "NoExecute"
PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
# Only these taint effects keep pods off a node; PreferNoSchedule weighs in scoring.
FILTERING_EFFECTS: Final = frozenset({NO_SCHEDULE, NO_EXECUTE})


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What the scheduler needs of one node object.

    `conditions` maps each status condition's type to its status (``{"Ready": "True"}``); `ready` is
    whether Ready is True. `addresses` maps an address type to the node's first address of that type.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=_empty)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    allocatable: Resources = ZERO_RESOURCES
    allocatable_pods: int = 0  # as kube-scheduler: a node whose status does not say has room for none
    addresses: Mapping[str, str] = field(default_factory=_empty)
    resource_version: str = ""
    conditions: Mapping[str, str] = field(default_factory=_empty)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> NodeInfo:
        """Parse a node as the API returns it (a dict); raises `FieldError` naming a malformed field."""
        metadata = object_field(obj.get("metadata"), "metadata")
        spec = object_field(obj.get("spec"), "spec")
        status = object_field(obj.get("status"), "status")
        allocatable = object_field(status.get("allocatable"), "status.allocatable")
        conditions = {
            condition.get("type") or "": condition.get("status") or "Unknown"
            for condition in list_field(status.get("conditions"), "status.conditions")
        }
        addresses: dict[str, str] = {}
        for address in list_field(status.get("addresses"), "status.addresses"):
            addresses.setdefault(address.get("type") or "", address.get("address") or "")
        return cls(
            name=metadata.get("name") or "",
            labels=MappingProxyType(dict(object_field(metadata.get("labels"), "metadata.labels"))),
            taints=tuple(
                _taint(taint, f"spec.taints[{index}]")
                for index, taint in enumerate(list_field(spec.get("taints"), "spec.taints"))
            ),
            unschedulable=bool(spec.get("unschedulable")),
            ready=conditions.get("Ready") == "True",
            allocatable=resources_from_list(allocatable, "status.allocatable"),
            allocatable_pods=parse_quantity(allocatable.get(PODS, 0), "status.allocatable.pods"),
            addresses=MappingProxyType(addresses),
            resource_version=metadata.get("resourceVersion") or "",
            conditions=MappingProxyType(conditions),
        )


def _taint(taint: Mapping[str, Any], path: str) -> Taint:
    key, effect = taint.get("key"), taint.get("effect")
    if not key or not effect:
        raise FieldError(f"{path}: a taint needs a key and an effect, got {dict(taint)!r}")
    return Taint(key=key, value=taint.get("value") or "", effect=effect)
