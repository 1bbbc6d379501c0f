"""`make bench-quality` measures the policy shipped to users, examples/fewer-hot-nodes.yaml (issue 40): the
benchmark overrides only what the sandbox decides, the estimation-off variant its estimation and the p90
variant its windowed plugins' aggregation."""

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
    departs = {"promsched-noest": {"estimation"}, "promsched-p90": {"plugins"}}.get(variant.key, set())
    assert changed <= SANDBOX_FIELDS | departs
    assert measured["spec"]["schedulerName"] == variant.scheduler_name
    assert measured["spec"]["prometheus"] == {**shipped["spec"]["prometheus"], "url": URL}
    if variant.key != "promsched-p90":
        assert measured["spec"]["plugins"] == shipped["spec"]["plugins"]


def test_the_p90_variant_reads_each_windowed_plugin_as_its_p90_and_nothing_else() -> None:
    """Issue 40's third item: the same plugins and weights; cpu (over 1m) on p90, memory (an instant
    value, which has no window to take a quantile of) as shipped."""
    variant = next(v for v in SCHEDULERS if v.key == "promsched-p90")
    plugins = quality_policy(URL, "15s", variant)["spec"]["plugins"]

    shipped = {plugin["name"]: plugin for plugin in shipped_policy()["spec"]["plugins"]}
    assert plugins == [shipped["cpu"] | {"aggregation": "p90"}, shipped["memory"]]
    parsed = SchedulingPolicy.from_object(quality_policy(URL, "15s", variant)).spec.plugins
    assert [p.aggregation for p in parsed] == ["p90", None]


def test_the_shipped_policy_weighs_cpu_over_1m_then_memory() -> None:
    """The settings measured before the file existed (bench/quality.py's QUALITY_PLUGINS), unchanged."""
    spec = SchedulingPolicy.from_object(shipped_policy()).spec

    assert [(p.name, p.weight, p.time_range) for p in spec.plugins] == [("cpu", 6, "1m"), ("memory", 2, "0s")]
    assert spec.estimation.source.value == "Siblings"
