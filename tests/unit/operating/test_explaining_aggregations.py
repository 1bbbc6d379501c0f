"""`explain` and `score` say how each plugin sums up its window where it does not take the mean."""

from __future__ import annotations

from datetime import UTC, datetime

from promsched.api.policies import SchedulingPolicy
from promsched.api.statuses import Decision, Preflight, PreflightQuery
from promsched.metrics.scoring import NodeResult, PluginResult
from promsched.operating.inspections import Explanation, Ranking
from promsched.operating.rendering import (
    explanation_document,
    policy_aggregations,
    ranking_document,
    render_explanation,
    render_ranking,
)
from promsched.scheduling.cycle.deciding import Outcome
from support.policies import policy_object, spec_document

PLUGINS = (
    {"name": "cpu", "weight": 3, "aggregation": "p90"},
    {"name": "memory", "weight": 1, "aggregation": "avg"},
    {"name": "diskIO", "weight": 1, "aggregation": "max"},
)
POLICY = SchedulingPolicy.from_object(policy_object("web", spec_document(*PLUGINS)))
TOP = NodeResult(
    "node-1",
    85.0,
    (PluginResult("cpu", 10.0, 90.0), PluginResult("memory", 30.0, 70.0), PluginResult("diskIO", 5.0, 95.0)),
    (),
)
HEADER = "NODE      cpu (w3, p90)  memory (w1)  diskIO (w1, max)  TOTAL"


def test_only_the_plugins_that_do_not_take_the_mean_are_named() -> None:
    assert policy_aggregations(POLICY) == {"cpu": "p90", "diskIO": "max"}


def test_an_explanation_names_each_plugins_aggregation_beside_its_weight() -> None:
    decision = Decision.model_validate(
        {
            "pod": "shop/web-0",
            "node": "node-1",
            "time": "2030-01-01T10:00:01Z",
            "latencyMs": 3,
            "generation": 1,
            "mode": "Enforce",
            "topNodes": [TOP.to_api().to_object()],
        }
    )
    explanation = Explanation("shop/web-0", "node-1", POLICY, decision)
    assert HEADER in render_explanation(explanation).splitlines()
    assert explanation_document(explanation)["policy"]["aggregations"] == {"cpu": "p90", "diskIO": "max"}


def test_a_ranking_names_them_in_its_table_its_problems_and_its_document() -> None:
    preflight = Preflight(
        checked_at=datetime(2030, 1, 1, 10, 0, tzinfo=UTC),
        queries=[
            PreflightQuery(plugin="cpu", query="q1", aggregation="p90", ok=False, error="bad_data: x"),
            PreflightQuery(plugin="memory", query="q2", ok=True),
        ],
    )
    ranking = Ranking(POLICY, "any pod", Outcome("node-1", (TOP,), {}, 1), preflight)
    lines = render_ranking(ranking).splitlines()
    assert HEADER in lines
    assert "  cpu (p90): query failed: bad_data: x" in lines
    document = ranking_document(ranking)
    assert document["policy"]["aggregations"] == {"cpu": "p90", "diskIO": "max"}
    assert document["preflight"]["queries"][0]["aggregation"] == "p90"
