"""A record's wire form, written without the Decision model, is byte for byte the model's dump, and so
is the status body built from such forms."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.decisions import (
    bound_facts,
    decision_model,
    lazy_record,
    scored_node,
    unschedulable_facts,
)

from promsched.api.fields import Mode
from promsched.api.statuses import (
    ConditionType,
    MissingSeries,
    Preflight,
    PreflightQuery,
    SchedulingPolicyStatus,
)
from promsched.metrics.scoring import NodeResult, PluginResult
from promsched.scheduling.decision_records import DecisionFacts
from promsched.scheduling.recording import PolicyStatus, condition

# A node whose plugins had no fresh sample (raw absent), did not count (score absent), or scored a
# whole number (ints, as the model makes them floats).
PARTLY_SCORED = NodeResult(
    "node-7",
    50,
    (PluginResult("cpu", None, 50), PluginResult("memory", 12, None), PluginResult("network", None, None)),
    (),
)

FACTS = {
    "bound at 1000 nodes": bound_facts(),
    "unschedulable": unschedulable_facts(),
    "more filter reasons than shown, one too long": unschedulable_facts(
        filtered={**{f"reason {index}": index for index in range(40)}, "x" * 2000: 1000}
    ),
    "whole numbers, missing samples, Shadow": bound_facts(
        decided_at=1_796_000_000, latency_ms=0, mode=Mode.SHADOW, shown=(PARTLY_SCORED,), estimate=None
    ),
    "more plugins than shown": bound_facts(shown=(scored_node("node-1", 3.0, plugins=25),)),
}


@pytest.mark.parametrize("facts", FACTS.values(), ids=FACTS.keys())
def test_a_records_wire_form_is_the_decision_models_dump(facts: DecisionFacts) -> None:
    assert json.dumps(facts.wire()) == json.dumps(decision_model(facts).to_object())


def reference_body(status: PolicyStatus, facts: list[DecisionFacts]) -> dict[str, Any]:
    """The status body as the SchedulingPolicyStatus model dumps it, with the merge patch's explicit
    empties, for a status whose records were made from `facts`."""
    models = [decision_model(each) for each in facts]
    shown = models[-status.history :] if status.history else []
    body = SchedulingPolicyStatus(
        observed_generation=status.observed_generation,
        conditions=status.conditions,
        scheduled=status.scheduled,
        unschedulable=status.unschedulable,
        unschedulable_now=len(status.failing),
        errors=status.errors,
        last_decision=models[-1] if models else None,
        recent_decisions=shown[::-1],
        preflight=status.preflight,
        rebalance=status.rebalance,
    ).to_object()
    for key, empty in (
        ("lastDecision", None),
        ("preflight", None),
        ("rebalance", None),
        ("recentDecisions", []),
    ):
        body.setdefault(key, empty)
    if body["lastDecision"] is not None:
        body["lastDecision"].setdefault("node", None)
    return body


PREFLIGHT = Preflight(
    checked_at=datetime(2026, 11, 29, tzinfo=UTC),
    queries=[
        PreflightQuery(plugin="cpu", query="q1", ok=True),
        PreflightQuery(plugin="memory", query="q2", ok=False, error="bad"),
    ],
    missing_series=[MissingSeries(plugin="cpu", nodes=["node-2"], count=1)],
)


@pytest.mark.parametrize(
    ("history", "records", "preflight"),
    [(10, 12, PREFLIGHT), (3, 2, None), (0, 4, PREFLIGHT), (5, 0, None)],
    ids=["more records than shown", "fewer records than shown", "none shown", "no records"],
)
def test_a_status_body_is_the_status_models_dump(
    history: int, records: int, preflight: Preflight | None
) -> None:
    status = PolicyStatus(history=history, observed_generation=2, preflight=preflight)
    status.set_conditions([condition(ConditionType.READY, True, "Ready", generation=2)])
    facts = [
        bound_facts(pod=f"bench/p-{index}", decided_at=1_796_000_000 + index) for index in range(records)
    ]
    for index, each in enumerate(facts):
        status.record_scheduled(f"uid-{index}", lazy_record(each))
    if records:  # the latest fits nowhere: lastDecision says its node is gone, the list shows none
        facts.append(unschedulable_facts())
        status.record_unschedulable("uid-stuck", "0/1000 nodes are available", lazy_record(facts[-1]))
    expected = json.dumps(reference_body(status, facts))
    assert json.dumps(status.to_status()) == expected
    assert json.dumps(status.to_status()) == expected  # again, from the forms kept
