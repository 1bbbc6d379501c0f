"""spec.rebalance: moving pods off nodes that stay hot, with the same plugins that place them.

Thresholds name the policy's own plugins, so a node counts as hot by exactly the metric (query, window,
identity) that scheduling reads. The gap between `hotThreshold` and `targetThreshold` is the
hysteresis: a node is relieved down to the target, and a pod only moves to a node that stays under
it, so what is moved is never sent straight back.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from promsched.api.fields import (
    PLUGIN_NAME_PATTERN,
    Duration,
    NodeName,
    ShortText,
    SpecModel,
    StatusModel,
    parse_duration,
)

# Label keys (an optional DNS-subdomain prefix, "/", a 63-character name) and values, as the API bounds them.
LabelKey = Annotated[str, Field(min_length=1, max_length=317)]
LabelValue = Annotated[str, Field(max_length=63)]


class RebalanceMode(StrEnum):
    OFF = "Off"
    DRY_RUN = "DryRun"
    ENFORCE = "Enforce"


class SelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class LabelSelectorRequirement(SpecModel):
    """One requirement of a label selector, as metav1.LabelSelectorRequirement."""

    key: LabelKey = Field(description="The label key.")
    operator: SelectorOperator = Field(description="In, NotIn, Exists or DoesNotExist.")
    values: list[LabelValue] | None = Field(
        None, max_length=64, description="Values for In and NotIn; must be empty for Exists and DoesNotExist."
    )

    @model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        wants_values = self.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN)
        if wants_values and not self.values:
            raise ValueError(f"values: required for operator {self.operator.value}; list at least one")
        if not wants_values and self.values:
            raise ValueError(f"values: must be empty for operator {self.operator.value}; remove them")
        return self


class PodLabelSelector(SpecModel):
    """A label selector over pods (metav1.LabelSelector); {} selects every pod."""

    match_labels: dict[LabelKey, LabelValue] | None = Field(
        None, max_length=64, description="Labels a pod must carry, key: value."
    )
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        None, max_length=32, description="Requirements a pod's labels must all meet."
    )


class RebalanceThreshold(SpecModel):
    """When a node counts as hot for one of the policy's plugins, and how far to relieve it."""

    plugin: str = Field(
        min_length=1,
        max_length=63,
        pattern=PLUGIN_NAME_PATTERN,
        description="A plugin of spec.plugins: cpu, memory, diskIO, diskSpace, network or a custom one.",
    )
    hot_threshold: float = Field(
        description="A node is hot while the plugin's value stays above this for sustainedFor. Built-ins: "
        "a load percentage 0..100. Custom: a raw value on the worse side according to higherIsBetter."
    )
    target_threshold: float = Field(
        description="Pods move off a hot node until its expected value is at most this, and only to "
        "nodes that stay at most this with the pod added. Must be on the better side of hotThreshold; "
        "the gap is the hysteresis."
    )


class RebalancePods(SpecModel):
    """Which pods may be moved. Pods without a controller, mirror pods and DaemonSet pods never are."""

    selector: PodLabelSelector | None = Field(
        None,
        description="Only pods matching this label selector may move (default: only pods whose "
        "spec.schedulerName is this policy's schedulerName).",
    )
    allow_local_storage: bool = Field(
        False,
        description="Whether pods with emptyDir or hostPath volumes may move (their local data is lost).",
    )
    min_pod_age: Duration = Field(
        "10m", description="Pods younger than this (from status.startTime) never move (Go duration)."
    )


class RebalanceLimits(SpecModel):
    """How much one cycle, one node and the whole cluster may be disturbed."""

    max_evictions_per_node: int = Field(
        1, ge=1, le=100, description="At most this many pods leave one node in a cycle."
    )
    max_evictions_per_cycle: int = Field(
        5, ge=1, le=1000, description="At most this many pods move in a cycle."
    )
    max_evictions_per_minute: int = Field(
        10, ge=1, le=10000, description="Cluster-wide: at most this many evictions in any minute."
    )


class RebalanceSpec(SpecModel):
    """Moving pods off nodes that stay hot. Off by default."""

    mode: RebalanceMode = Field(
        RebalanceMode.OFF,
        description="Off: nothing. DryRun: record in status.rebalance what would move and why. Enforce: "
        "evict through the Eviction API (PodDisruptionBudgets are honoured) and record what moved.",
    )
    interval: Duration = Field(
        "1m", description="How often a rebalance cycle runs (Go duration, at least 10s)."
    )
    sustained_for: Duration = Field(
        "5m",
        description="How long a node's value must stay past hotThreshold, read over the metric's own "
        "samples for this whole window (not one sample), before anything moves off it.",
    )
    thresholds: list[RebalanceThreshold] = Field(
        default_factory=list,
        max_length=20,
        description="Per plugin: when a node is hot and how far to relieve it. Required unless mode is Off.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["plugin"]},
    )
    pods: RebalancePods = Field(RebalancePods(), description="Which pods may move.")
    limits: RebalanceLimits = Field(RebalanceLimits(), description="Eviction limits.")

    @model_validator(mode="after")
    def _consistent(self) -> RebalanceSpec:
        if parse_duration(self.interval, "rebalance.interval") < 10:
            raise ValueError("interval: must be at least 10s")
        if parse_duration(self.sustained_for, "rebalance.sustainedFor") <= 0:
            raise ValueError("sustainedFor: must be longer than 0s, e.g. 5m")
        parse_duration(self.pods.min_pod_age, "rebalance.pods.minPodAge")
        names = [threshold.plugin for threshold in self.thresholds]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"thresholds: one entry per plugin; {', '.join(repeated)} appear more than once")
        if self.mode is not RebalanceMode.OFF and not self.thresholds:
            raise ValueError(
                f"thresholds: required when mode is {self.mode.value}; add e.g. "
                "{plugin: cpu, hotThreshold: 85, targetThreshold: 70}, or set mode: Off"
            )
        return self

    @property
    def interval_seconds(self) -> float:
        return parse_duration(self.interval, "rebalance.interval")

    @property
    def sustained_seconds(self) -> float:
        return parse_duration(self.sustained_for, "rebalance.sustainedFor")

    @property
    def min_pod_age_seconds(self) -> float:
        return parse_duration(self.pods.min_pod_age, "rebalance.pods.minPodAge")


# --- Status --------------------------------------------------------------------------------------

# Enough to read a cycle at a glance; the Events and metrics have the rest.
MAX_LISTED = 20


class HotNodeStatus(StatusModel):
    """A node whose value stayed past a hot threshold for sustainedFor."""

    node: NodeName = Field(description="Node name.")
    plugin: str = Field(max_length=63, description="The plugin whose threshold it is past.")
    value: float = Field(description="The value it held past the threshold over the whole window.")


class RebalanceMoveStatus(StatusModel):
    """A pod moved (Enforce) or that would move (DryRun) off a hot node."""

    pod: str = Field(max_length=317, description="The pod, as namespace/name.")
    node: NodeName = Field(description="The hot node it leaves.")
    destination: NodeName = Field(description="Where the scheduler would place its replacement now.")
    reason: ShortText = Field(description="Why, with the values, as in the Event.")


class BlockedMoveStatus(StatusModel):
    """A hot node that keeps a pod, and why."""

    node: NodeName = Field(description="The hot node.")
    pod: str = Field("", max_length=317, description="The pod that could not move, as namespace/name.")
    reason: ShortText = Field(description="Why nothing moved.")


class RebalanceStatus(StatusModel):
    """The latest rebalance cycle."""

    mode: RebalanceMode = Field(description="The mode the cycle ran in.")
    last_cycle: datetime = Field(description="When the cycle ran.")
    hot_node_count: int = Field(0, ge=0, description="How many nodes stayed past a hot threshold.")
    hot_nodes: list[HotNodeStatus] = Field(
        default_factory=list, max_length=MAX_LISTED, description="The hottest of them."
    )
    moves: list[RebalanceMoveStatus] = Field(
        default_factory=list,
        max_length=MAX_LISTED,
        description="DryRun: what would move. Enforce: what was evicted.",
    )
    blocked: list[BlockedMoveStatus] = Field(
        default_factory=list, max_length=MAX_LISTED, description="Moves that did not happen, and why."
    )
    evictions: int = Field(0, ge=0, description="Pods evicted by this policy since the operator started.")
    message: ShortText = Field("", description="Why the cycle did nothing, e.g. metrics not fresh.")
