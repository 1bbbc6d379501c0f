"""Issue 40's estimation error (bench/quality_estimates.py) on a fixed trace: each pod's estimate, read
from its promsched.io/decision annotation, against its workload's real usage, by source, beside
Koordinator's 85% / 70% of the request."""

from __future__ import annotations

import pytest
from bench.quality_estimates import estimation_errors, estimation_table, source_of
from bench.quality_measures import PodLives
from bench.quality_trace import Usage, Workload

from promsched.api.annotations import DECISION_ANNOTATION, encode_decision
from promsched.api.statuses import UsageEstimate

GIB = 2**30
WEB = Workload("web", "service", 1000, 2 * GIB, Usage(400, GIB, 1.0, 1e5), 0.0, None, ((0.0, 3),))
BATCH = Workload("batch", "batch", 500, GIB, Usage(1000, GIB // 2, 1.0, 1e5), 0.0, 60.0, ((0.0, 1),))
SIBLINGS = "p90 of 2 running siblings (ReplicaSet/web)"


def _pod(lives: PodLives, name: str, app: str, estimate: UsageEstimate | None) -> None:
    annotations = {} if estimate is None else {DECISION_ANNOTATION: encode_decision("node-0", [], estimate)}
    pod = {"metadata": {"name": name, "labels": {"app": app}, "annotations": annotations}, "spec": {}}
    lives.observe("ADDED", pod, 0.0)


def _fixed_trace() -> PodLives:
    lives = PodLives()
    # web-1 before its siblings ran: the rule held (1 x request); web-2 and web-3 from their siblings.
    _pod(
        lives,
        "web-1",
        "web",
        UsageEstimate(
            milli_cpu=1000, memory=2 * GIB, cpu_basis="1 x request 1", memory_basis="1 x request 2Gi"
        ),
    )
    _pod(
        lives,
        "web-2",
        "web",
        UsageEstimate(milli_cpu=500, memory=GIB, cpu_basis=SIBLINGS, memory_basis=SIBLINGS),
    )
    _pod(
        lives,
        "web-3",
        "web",
        UsageEstimate(milli_cpu=300, memory=GIB, cpu_basis=SIBLINGS, memory_basis=SIBLINGS),
    )
    _pod(
        lives,
        "batch-1",
        "batch",
        UsageEstimate(
            milli_cpu=500, memory=GIB, cpu_basis="1 x request 500m", memory_basis="1 x request 1Gi"
        ),
    )
    # Placed by another scheduler (no annotation), and a pod of no trace workload: both left out.
    _pod(lives, "web-4", "web", None)
    _pod(
        lives,
        "other-1",
        "other",
        UsageEstimate(milli_cpu=1, memory=1, cpu_basis=SIBLINGS, memory_basis=SIBLINGS),
    )
    return lives


def test_errors_are_summed_per_source_beside_koordinators_rule_on_the_same_pods() -> None:
    errors = estimation_errors(_fixed_trace(), {"web": WEB, "batch": BATCH}, "Siblings")

    assert set(errors) == {"Siblings", "fallback"}
    siblings = errors["Siblings"]
    # web-2: |500 - 400| / 400 = 25%; web-3: 25%. Koordinator: 850m for both, 112.5%.
    assert siblings["cpu"] == {"pods": 2, "mae_pct": 25.0, "koordinator_mae_pct": 112.5}
    # Memory 1Gi for 1Gi used: 0%; Koordinator 70% of 2Gi = 1.4Gi, 40% off.
    assert siblings["memory"]["mae_pct"] == 0.0
    assert siblings["memory"]["koordinator_mae_pct"] == pytest.approx(40.0)
    fallback = errors["fallback"]
    # web-1: 1000m for 400m, 150%; batch-1: 500m for 1000m, 50%. Koordinator: 112.5% and 57.5%.
    assert fallback["cpu"]["pods"] == 2
    assert fallback["cpu"]["mae_pct"] == pytest.approx(100.0)
    assert fallback["cpu"]["koordinator_mae_pct"] == pytest.approx(85.0)
    # web-1: 2Gi for 1Gi, 100%; batch-1: 1Gi for 0.5Gi, 100%. Koordinator: 40% and 40%.
    assert fallback["memory"]["mae_pct"] == pytest.approx(100.0)
    assert fallback["memory"]["koordinator_mae_pct"] == pytest.approx(40.0)


def test_a_policy_estimating_by_requests_counts_its_pods_under_requests() -> None:
    lives = PodLives()
    _pod(
        lives,
        "batch-1",
        "batch",
        UsageEstimate(
            milli_cpu=500, memory=GIB, cpu_basis="1 x request 500m", memory_basis="1 x request 1Gi"
        ),
    )

    errors = estimation_errors(lives, {"batch": BATCH}, "Requests")

    assert set(errors) == {"Requests"}
    assert errors["Requests"]["cpu"]["mae_pct"] == 50.0


@pytest.mark.parametrize(
    ("basis", "policy", "source"),
    [
        (SIBLINGS, "Siblings", "Siblings"),
        ("p90 of 1 running sibling (ReplicaSet/web)", "Siblings", "Siblings"),
        ("1 x request 500m", "Siblings", "fallback"),
        ("the pod's limit", "Siblings", "fallback"),
        ("1 x request 500m", "Requests", "Requests"),
    ],
)
def test_the_source_is_read_from_the_basis(basis: str, policy: str, source: str) -> None:
    assert source_of(basis, policy) == source


def test_the_table_has_a_row_per_scheduler_source_and_resource() -> None:
    errors = estimation_errors(_fixed_trace(), {"web": WEB, "batch": BATCH}, "Siblings")

    lines = estimation_table([{"label": "promsched", "estimation": errors}, {"label": "kube-scheduler"}])

    assert lines[2:] == [
        "| promsched | Siblings | cpu | 2 | 25.0 | 112.5 |",
        "| promsched | Siblings | memory | 2 | 0.0 | 40.0 |",
        "| promsched | fallback | cpu | 2 | 100.0 | 85.0 |",
        "| promsched | fallback | memory | 2 | 100.0 | 40.0 |",
    ]
    assert estimation_table([{"label": "kube-scheduler"}]) == []
