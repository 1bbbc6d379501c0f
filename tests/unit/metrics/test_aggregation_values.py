"""max and pNN evaluated by promtool over a node with a burst: exact values, not just syntax.

Node A is idle but for a burst; node B holds steady at 50%. At 8m, the 5m window (3:00 to 8:00, 21
samples) holds A's burst, so its mean stays low while its p90 and max show the burst. Skipped where
promtool is not installed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from promsched.api.builtins import NODE_MIXIN_RULES, MetricSource
from promsched.api.plugin_specs import PluginSpec
from promsched.api.policies import NodeIdentitySource
from promsched.metrics import NodeIdentity
from promsched.metrics.plugins import BUILTIN_PLUGINS, build_plugin
from promsched.sandbox.node_metrics.recording_rules import node_mixin_expressions
from support.promtool import assert_evaluates_to, counter, gauge, series

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")

A = {"instance": "a:9100", "job": "node"}
B = {"instance": "b:9100", "job": "node"}
UNAME = NodeIdentity(NodeIdentitySource.UNAME_NODENAME)
NODE_A = {"instance": "a:9100"}
NODE_B = {"instance": "b:9100"}
# A's idle (and free disk time) counter: 1 s/s, flat from 4:00 to 6:00 (100% busy), then 1 s/s again.
# Of the 21 steps of a 5m subquery at 8:00, the 1m rates at 5:00..6:00 (5 of them) are wholly in the
# burst, so the p90 (the 19th of 21) and max are 100%; the 5m mean is 2m of 5: 40% (39.999... in floats,
# which promtool does not round, so the mean is left to test_plugin_queries).
BURST = "0+15x16 240x7 255+15x15"
# A's available memory and disk bytes (of 100) over the window: once 0, six times 20, else 80. Use is
# 100% at most, 80% at the p90 (the p10 of available, whether or not the window's first sample counts).
DIP = "80x12 20x5 0 80x20"

INPUT_SERIES = [
    *(series("node_cpu_seconds_total", {**A, "cpu": cpu, "mode": "idle"}, BURST) for cpu in "01"),
    *(counter("node_cpu_seconds_total", {**B, "cpu": cpu, "mode": "idle"}, 0.5) for cpu in "01"),
    series("node_memory_MemAvailable_bytes", A, DIP),
    gauge("node_memory_MemTotal_bytes", A, 100),
    gauge("node_memory_MemAvailable_bytes", B, 50),
    gauge("node_memory_MemTotal_bytes", B, 100),
    # Busy, not idle: 100% busy outside A's burst window, idle inside; B's disk 50% busy.
    series("node_disk_io_time_seconds_total", {**A, "device": "vda"}, BURST),
    counter("node_disk_io_time_seconds_total", {**B, "device": "vda"}, 0.5),
    series("node_filesystem_avail_bytes", {**A, "mountpoint": "/"}, DIP),
    gauge("node_filesystem_size_bytes", {**A, "mountpoint": "/"}, 100),
    gauge("node_filesystem_avail_bytes", {**B, "mountpoint": "/"}, 50),
    gauge("node_filesystem_size_bytes", {**B, "mountpoint": "/"}, 100),
    gauge("node_uname_info", {**A, "nodename": "node-a"}, 1),
    gauge("node_uname_info", {**B, "nodename": "node-b"}, 1),
]

CASES: list[tuple[dict[str, Any], list[tuple[dict[str, str], float]]]] = [
    ({"name": "cpu", "aggregation": "p90"}, [(NODE_A, 100), (NODE_B, 50)]),
    ({"name": "cpu", "aggregation": "max"}, [(NODE_A, 100), (NODE_B, 50)]),
    ({"name": "memory", "aggregation": "p90"}, [(NODE_A, 80), (NODE_B, 50)]),
    ({"name": "memory", "aggregation": "max"}, [(NODE_A, 100), (NODE_B, 50)]),
    ({"name": "diskSpace", "aggregation": "p90"}, [(NODE_A, 80), (NODE_B, 50)]),
    ({"name": "diskSpace", "aggregation": "max"}, [(NODE_A, 100), (NODE_B, 50)]),
    # The disk is busy all but the burst: 60% on average, 100% at most and at the p90.
    ({"name": "diskIO", "aggregation": "p90"}, [(NODE_A, 100), (NODE_B, 50)]),
    ({"name": "diskIO", "aggregation": "max"}, [(NODE_A, 100), (NODE_B, 50)]),
]


@pytest.mark.parametrize(("settings", "expected"), CASES, ids=lambda case: str(case)[:40])
def test_a_burst_shows_in_the_p90_and_the_max_not_in_the_mean(
    tmp_path: Path, settings: dict[str, Any], expected: list[tuple[dict[str, str], float]]
) -> None:
    query = build_plugin(PluginSpec.model_validate({"timeRange": "5m", **settings}), UNAME).query
    assert_evaluates_to(tmp_path, INPUT_SERIES, query, expected)


@pytest.mark.parametrize(("aggregation", "expected"), [("p90", 80), ("max", 100)])
def test_the_memory_rule_gives_what_node_exporter_gives(
    tmp_path: Path, aggregation: str, expected: float
) -> None:
    """The node mixin's memory ratio, recorded every 15s, summed up as node_exporter's own series are."""
    spec = PluginSpec(name="memory", aggregation=aggregation, source="RecordingRules")
    query = build_plugin(spec, UNAME).query
    rules = node_mixin_expressions("node")
    assert_evaluates_to(tmp_path, INPUT_SERIES, query, [(NODE_A, expected), (NODE_B, 50)], rules)


SOURCES = [
    (name, source)
    for name in sorted(BUILTIN_PLUGINS)
    for source in (MetricSource.NODE_EXPORTER, MetricSource.RECORDING_RULES)
    if source is MetricSource.NODE_EXPORTER or name in NODE_MIXIN_RULES
]


@pytest.mark.parametrize(("name", "source"), SOURCES)
def test_every_builtin_percentile_query_is_valid_promql(tmp_path: Path, name: str, source: str) -> None:
    """Each built-in's p90, from either source, parses and evaluates (to no series where the input has
    none of its metrics: network, and the rules this input does not feed)."""
    spec = PluginSpec(name=name, aggregation="p90", source=source)
    query = build_plugin(spec, UNAME).query
    rules = node_mixin_expressions("node")
    assert_evaluates_to(tmp_path, INPUT_SERIES, f"count({query}) > 2", [], rules)
