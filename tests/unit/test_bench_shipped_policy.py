"""`make bench-quality` measures the policy shipped to users, examples/fewer-hot-nodes.yaml (issue 40): the
benchmark overrides only what the sandbox decides, and the estimation-off variant its estimation."""

from __future__ import annotations

import pytest
from bench.quality import SCHEDULERS, quality_policy, shipped_policy
from bench.variants import Variant

from promsched.api.policies import SchedulingPolicy

SANDBOX_FIELDS = {"schedulerName", "prometheus", "refreshInterval"}
URL = "http://127.0.0.1:9999"


@pytest.mark.parametrize(
    "variant", [v for v in SCHEDULERS if v.kind == "promsched"], ids=lambda variant: variant.key
)
def test_the_quality_benchmark_runs_the_shipped_policy(variant: Variant) -> None:
    shipped = shipped_policy()
    measured = quality_policy(URL, "15s", variant)

    SchedulingPolicy.from_object(measured)
    assert measured["metadata"] == shipped["metadata"]
    fields = shipped["spec"].keys() | measured["spec"].keys()
    changed = {field for field in fields if shipped["spec"].get(field) != measured["spec"].get(field)}
    assert changed <= SANDBOX_FIELDS | ({"estimation"} if variant.key == "promsched-noest" else set())
    assert measured["spec"]["schedulerName"] == variant.scheduler_name
    assert measured["spec"]["prometheus"] == {**shipped["spec"]["prometheus"], "url": URL}
    assert measured["spec"]["plugins"] == shipped["spec"]["plugins"]


def test_the_shipped_policy_weighs_cpu_over_1m_then_memory() -> None:
    """The settings measured before the file existed (bench/quality.py's QUALITY_PLUGINS), unchanged."""
    spec = SchedulingPolicy.from_object(shipped_policy()).spec

    assert [(p.name, p.weight, p.time_range) for p in spec.plugins] == [("cpu", 6, "1m"), ("memory", 2, "0s")]
    assert spec.estimation.source.value == "Siblings"
