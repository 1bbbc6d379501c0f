"""`explain` and `score` show the pod's usage estimate and where each amount came from."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from promsched.api.annotations import decode_decision, encode_decision
from promsched.api.policies import SchedulingPolicy
from promsched.api.statuses import Decision, Preflight, UsageEstimate
from promsched.metrics.scoring import NodeResult, PluginResult
from promsched.operating.inspecting import load_pod
from promsched.operating.inspections import Explanation, Ranking
from promsched.operating.rendering import (
    explanation_document,
    ranking_document,
    render_explanation,
    render_ranking,
)
from promsched.scheduling.cycle.deciding import Outcome
from support.policies import policy_object, spec_document

MIB = 1024**2
ESTIMATE = UsageEstimate(
    milli_cpu=1500,
    memory=300 * MIB,
    cpu_basis="p90 of 5 running siblings (ReplicaSet/web-7d9)",
    memory_basis="1 x request 256Mi",
)
POLICY = SchedulingPolicy.from_object(policy_object("web", spec_document({"name": "cpu", "weight": 3})))
TOP = NodeResult("node-1", 85.0, (PluginResult("cpu", 10.0, 90.0),), ())


def decision(estimate: UsageEstimate | None) -> Decision:
    return Decision.model_validate(
        {
            "pod": "shop/web-0",
            "node": "node-1",
            "time": "2030-01-01T10:00:01Z",
            "latencyMs": 3,
            "generation": 1,
            "mode": "Enforce",
            "topNodes": [TOP.to_api().to_object()],
            **({"estimate": estimate.to_object()} if estimate is not None else {}),
        }
    )


def test_an_explanation_shows_the_estimate_and_its_sources() -> None:
    text = render_explanation(Explanation("shop/web-0", "node-1", POLICY, decision(ESTIMATE)))
    lines = text.splitlines()
    assert lines[6] == (
        "estimate    cpu 1500m (p90 of 5 running siblings (ReplicaSet/web-7d9)), "
        "memory 300Mi (1 x request 256Mi)"
    )
    assert "cpu and memory include the estimated usage of pods placed too recently" in text


def test_a_decision_recorded_before_estimates_says_requests() -> None:
    text = render_explanation(Explanation("shop/web-0", "node-1", POLICY, decision(None)))
    assert "estimate " not in text
    assert "cpu and memory include the requests of pods placed too recently" in text


def test_the_annotation_carries_the_estimate_to_explain() -> None:
    recorded = decode_decision(encode_decision("node-1", (TOP,), ESTIMATE))
    explanation = Explanation("shop/web-0", "node-1", POLICY, recorded)
    assert "estimate    cpu 1500m (p90 of 5 running siblings" in render_explanation(explanation)
    document = explanation_document(explanation)
    assert document["decision"]["estimate"] == ESTIMATE.to_object()
    assert explanation_document(Explanation("shop/web-0", "node-1", POLICY, decision(ESTIMATE)))["decision"][
        "estimate"
    ] == {
        "milliCpu": 1500,
        "memory": 300 * MIB,
        "cpuBasis": ESTIMATE.cpu_basis,
        "memoryBasis": "1 x request 256Mi",
    }


def test_a_ranking_shows_the_estimate_of_the_pod_it_ranks() -> None:
    preflight = Preflight(checked_at=datetime(2030, 1, 1, tzinfo=UTC))
    ranking = Ranking(POLICY, "any pod", Outcome("node-1", (TOP,), {}, 1), preflight, estimate=ESTIMATE)
    assert "estimate  cpu 1500m (p90 of 5 running siblings" in render_ranking(ranking)
    assert ranking_document(ranking)["estimate"]["milliCpu"] == 1500


@pytest.mark.parametrize(("kind", "controller"), [("StatefulSet", "StatefulSet/db"), ("Deployment", "")])
def test_a_workload_file_gives_a_pod_of_that_controller(tmp_path: Path, kind: str, controller: str) -> None:
    # A StatefulSet owns its pods: its running ones are the siblings; a Deployment's are its ReplicaSet's.
    workload = {
        "kind": kind,
        "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(workload))
    assert load_pod(path).controller == controller
