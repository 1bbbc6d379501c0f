"""Decision records as the scheduler keeps them, and the Decision model built from the same values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from promsched.api.fields import Mode
from promsched.api.statuses import Decision, FilteredCount, UsageEstimate
from promsched.metrics.scoring import NodeResult, PluginResult
from promsched.scheduling.decision_records import (
    FILTER_REASON_LENGTH,
    FILTER_REASONS_SHOWN,
    PLUGINS_SHOWN,
    DecisionFacts,
)
from promsched.scheduling.recording import LazyDecision

BUILT_INS = ("cpu", "memory", "diskIO", "diskSpace", "network")


def scored_node(node: str, load: float, plugins: int = len(BUILT_INS)) -> NodeResult:
    """A feasible node as the scorer leaves it: each plugin's raw load and its 100 - load score."""
    names = [*BUILT_INS, *(f"custom{index}" for index in range(plugins - len(BUILT_INS)))][:plugins]
    results = tuple(
        PluginResult(name, load + index / 3, 100 - load - index / 3) for index, name in enumerate(names)
    )
    return NodeResult(node, sum(result.score or 0.0 for result in results) / len(results), results, ())


def bound_facts(pod: str = "bench/p-0", node: str = "node-852", **fields: Any) -> DecisionFacts:
    """A pod placed on a 1000-node cluster: three nodes shown, five built-ins each, an estimate;
    `fields` replace any of it."""
    shown = (
        scored_node(node, 14.328205128205127),
        scored_node("node-794", 14.5),
        scored_node("node-3", 16.1),
    )
    facts = DecisionFacts(
        pod=pod,
        node=node,
        decided_at=1_796_000_000.915450,
        latency_ms=0.29767399973934516,
        generation=1,
        mode=Mode.ENFORCE,
        shown=shown,
        filtered={},
        estimate=UsageEstimate(
            milli_cpu=100, memory=64 * 1024**2, cpu_basis="1 x request 100m", memory_basis="1 x request 64Mi"
        ),
    )
    return replace(facts, **fields)


def unschedulable_facts(pod: str = "bench/stuck", filtered: Mapping[str, int] | None = None) -> DecisionFacts:
    """A pod that fitted no node: nothing shown, the nodes counted by why they were filtered."""
    return replace(
        bound_facts(pod),
        node=None,
        shown=(),
        filtered={"cpu load above 85%": 120, "node(s) had untolerated taint": 3}
        if filtered is None
        else filtered,
        estimate=None,
    )


def decision_model(facts: DecisionFacts) -> Decision:
    """The Decision model of a record, built and validated field by field from its values: what the
    record's wire form must equal the dump of."""
    most_first = sorted(facts.filtered.items(), key=lambda item: -item[1])[:FILTER_REASONS_SHOWN]
    return Decision(
        pod=facts.pod,
        node=facts.node,
        time=datetime.fromtimestamp(facts.decided_at, UTC),
        latency_ms=facts.latency_ms,
        generation=facts.generation,
        mode=facts.mode,
        top_nodes=[
            replace(result, plugins=result.plugins[:PLUGINS_SHOWN]).to_api() for result in facts.shown
        ],
        filtered=[
            FilteredCount(reason=reason[:FILTER_REASON_LENGTH], count=count) for reason, count in most_first
        ],
        estimate=facts.estimate,
    )


def lazy_record(facts: DecisionFacts) -> LazyDecision:
    """The record as the scheduler keeps it."""
    return LazyDecision(facts.wire, facts.estimate)
