"""SchedulingPolicy status: what promsched observed and decided, written by promsched only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from promsched.api.fields import (
    REASON_PATTERN,
    Mode,
    NodeName,
    ShortText,
    StatusModel,
    parse_model,
)
from promsched.api.rebalances import RebalanceStatus


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionType(StrEnum):
    """The condition types promsched writes to status.conditions."""

    READY = "Ready"
    PROMETHEUS_REACHABLE = "PrometheusReachable"
    METRICS_COMPLETE = "MetricsComplete"
    CONFLICT = "Conflict"


class Condition(StatusModel):
    """A metav1.Condition-shaped observation; promsched writes the types in ConditionType."""

    type: str = Field(max_length=316, description="Condition type, e.g. Ready.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        max_length=1024, pattern=REASON_PATTERN, description="CamelCase reason for the last transition."
    )
    message: str = Field("", max_length=32768, description="Human-readable detail.")
    last_transition_time: datetime = Field(description="When status last changed.")
    observed_generation: int | None = Field(
        None, ge=0, description="metadata.generation the condition was computed for."
    )


def set_condition(conditions: Sequence[Condition], new: Condition) -> list[Condition]:
    """`conditions` with `new` in place of its type; the transition time is kept if status did not change."""
    result = []
    replaced = False
    for condition in conditions:
        if condition.type != new.type:
            result.append(condition)
            continue
        replaced = True
        if condition.status == new.status:
            new = new.model_copy(update={"last_transition_time": condition.last_transition_time})
        result.append(new)
    return result if replaced else [*result, new]


def find_condition(conditions: Sequence[Condition], condition_type: str) -> Condition | None:
    return next((condition for condition in conditions if condition.type == condition_type), None)


class PluginScore(StatusModel):
    """One plugin's part in a node's score."""

    name: str = Field(max_length=63, description="Plugin name.")
    raw: float | None = Field(None, description="The metric value (absent when the node had no sample).")
    score: float | None = Field(None, description="Normalized score 0..100 before weighting.")


class NodeScore(StatusModel):
    """A candidate node and its weighted total."""

    node: NodeName = Field(description="Node name.")
    total: float = Field(description="Weighted score 0..100.")
    plugins: list[PluginScore] = Field(default_factory=list, max_length=20, description="Per-plugin scores.")


class FilteredCount(StatusModel):
    """How many nodes were filtered out for one reason."""

    reason: ShortText = Field(description="Why the nodes were filtered, e.g. threshold of cpu exceeded.")
    count: int = Field(ge=0, description="Number of nodes.")


class UsageEstimate(StatusModel):
    """What the pod was expected to use (spec.estimation), and how each amount was reached."""

    milli_cpu: int = Field(ge=0, description="CPU in millicores.")
    memory: int = Field(ge=0, description="Memory in bytes.")
    cpu_basis: ShortText = Field(
        description="How the CPU amount was reached, e.g. p90 of 5 running siblings (ReplicaSet/web-7d9)."
    )
    memory_basis: ShortText = Field(description="How the memory amount was reached, e.g. 1 x request 256Mi.")


class Decision(StatusModel):
    """What promsched decided for one pod."""

    pod: str = Field(max_length=317, description="The pod, as namespace/name.")
    node: NodeName | None = Field(None, description="The chosen node; absent when no node fitted.")
    time: datetime = Field(description="When the decision was made.")
    latency_ms: float = Field(ge=0, description="Milliseconds from pod seen to decision.")
    generation: int = Field(ge=0, description="metadata.generation of the policy that decided.")
    mode: Mode = Field(description="The policy mode at decision time.")
    top_nodes: list[NodeScore] = Field(
        default_factory=list, max_length=3, description="The three best-scoring nodes."
    )
    filtered: list[FilteredCount] = Field(
        default_factory=list, max_length=32, description="Nodes filtered out, by reason."
    )
    estimate: UsageEstimate | None = Field(
        None, description="What the pod was expected to use, counted against the cpu and memory thresholds."
    )


class PreflightQuery(StatusModel):
    """One plugin query as tried at preflight."""

    plugin: str = Field(max_length=63, description="Plugin name.")
    query: str = Field(max_length=8192, description="The PromQL sent.")
    aggregation: str | None = Field(
        None,
        max_length=3,
        description="How the query sums up the plugin's timeRange where that is not the mean (avg): max "
        "or pNN.",
    )
    ok: bool = Field(description="Whether the query succeeded.")
    error: ShortText | None = Field(None, description="The error, when it failed.")
    warnings: list[ShortText] | None = Field(
        None,
        max_length=5,
        description="What the server warned of with its answer (Prometheus' warnings and infos, a partial "
        "answer from Thanos or a VictoriaMetrics cluster): its values may be incomplete.",
    )


class MissingSeries(StatusModel):
    """Nodes a plugin found no series for."""

    plugin: str = Field(max_length=63, description="Plugin name.")
    nodes: list[NodeName] = Field(
        default_factory=list, max_length=20, description="The first 20 nodes without a series."
    )
    count: int = Field(ge=0, description="How many nodes had no series.")
    unmatched_series: list[ShortText] = Field(
        default_factory=list,
        max_length=5,
        description="The first 5 series the query returned for no known node, as promsched read them "
        '(e.g. instance="10.0.3.7:9100" (no single nodename in node_uname_info)): often why the nodes '
        "above have none.",
    )


class Preflight(StatusModel):
    """The result of checking every plugin query against Prometheus."""

    checked_at: datetime = Field(description="When the check ran.")
    engine: ShortText | None = Field(
        None,
        description="The engine that answered, from its build info: e.g. Prometheus 2.42.0, VictoriaMetrics "
        "v1.151.0, Thanos 0.39.2, Grafana Mimir 2.14.0.",
    )
    queries: list[PreflightQuery] = Field(
        default_factory=list, max_length=20, description="Per-plugin results."
    )
    missing_series: list[MissingSeries] = Field(
        default_factory=list, max_length=20, description="Plugins with nodes that have no series."
    )


class SchedulingPolicyStatus(StatusModel):
    """What promsched observed and decided; written by promsched only."""

    observed_generation: int | None = Field(
        None, ge=0, description="metadata.generation that promsched last acted on."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Ready, PrometheusReachable, MetricsComplete and Conflict.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    scheduled: int = Field(0, ge=0, description="Pods bound (Enforce) or scored (Shadow).")
    unschedulable: int = Field(
        0, ge=0, description="Pods that fitted no node at least once; each pod is counted once."
    )
    unschedulable_now: int = Field(
        0, ge=0, description="Pods waiting now because no node fits them (as of the last status write)."
    )
    errors: int = Field(0, ge=0, description="Scheduling attempts that failed with an error.")
    last_decision: Decision | None = Field(None, description="The most recent decision.")
    recent_decisions: list[Decision] = Field(
        default_factory=list, max_length=50, description="The latest decisions, newest first."
    )
    preflight: Preflight | None = Field(None, description="The latest query preflight check.")
    rebalance: RebalanceStatus | None = Field(
        None, description="The latest rebalance cycle (spec.rebalance)."
    )


def parse_status(status: Mapping[str, Any] | None) -> SchedulingPolicyStatus:
    """Validate an object's ``status``; an absent status is the empty one."""
    return parse_model(SchedulingPolicyStatus, status or {}, "status")
