"""aggregation: how a built-in sums up its timeRange (avg, max, pNN), as the exact PromQL it sends."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.api.plugin_specs import PluginSpec
from promsched.api.policies import NodeIdentitySource
from promsched.metrics import NodeIdentity, promql
from promsched.metrics.plugins import Plugin, build_plugin
from promsched.metrics.sustaining import sustained_query

UNAME = NodeIdentity(NodeIdentitySource.UNAME_NODENAME)
IDLE = 'node_cpu_seconds_total{mode="idle"}'
DISKS = 'device=~"sd[a-z]+|nvme[0-9]+n[0-9]+|vd[a-z]+|xvd[a-z]+"'
RX_RULE = "instance:node_network_receive_bytes_excluding_lo:rate5m"
TX_RULE = "instance:node_network_transmit_bytes_excluding_lo:rate5m"


def plugin(**settings: Any) -> Plugin:
    return build_plugin(PluginSpec.model_validate(settings), UNAME)


@pytest.mark.parametrize(
    ("percentile", "expected"),
    [
        (None, "avg_over_time(m[5m])"),
        (0, "min_over_time(m[5m])"),
        (100, "max_over_time(m[5m])"),
        (90, "quantile_over_time(0.9, m[5m])"),
        (5, "quantile_over_time(0.05, m[5m])"),
        (99, "quantile_over_time(0.99, m[5m])"),
    ],
)
def test_each_percentile_has_its_function(percentile: int | None, expected: str) -> None:
    assert promql.over_window(percentile, "m[5m]") == expected
    assert promql.summed_up_range(percentile, "m", 300) == expected
    assert promql.summed_up_range(percentile, "m", 0) == "m"


def test_a_subquery_steps_at_least_15s_and_at_most_20_times() -> None:
    assert promql.subquery("up", 300) == "(up)[5m:15s]"
    assert promql.subquery("up", 3600) == "(up)[1h:3m]"


CASES = [
    (
        {"name": "cpu", "aggregation": "p90"},
        f"quantile_over_time(0.9, (100 * (1 - avg by (instance) (rate({IDLE}[1m]))))[5m:15s])",
    ),
    (
        {"name": "cpu", "aggregation": "max", "timeRange": "1h"},
        # Each step's rate spans the 3m step, so the steps leave no part of the hour out.
        f"max_over_time((100 * (1 - avg by (instance) (rate({IDLE}[3m]))))[1h:3m])",
    ),
    (
        {"name": "cpu", "aggregation": "p95", "source": "RecordingRules"},
        "100 * max by (instance) (quantile_over_time(0.95, instance:node_cpu_utilisation:rate5m[5m]))",
    ),
    (
        {"name": "memory", "aggregation": "p90"},
        "100 * max by (instance) (1 - quantile_over_time(0.1, node_memory_MemAvailable_bytes[5m]) "
        "/ (avg_over_time(node_memory_MemTotal_bytes[5m]) > 0))",
    ),
    (
        {"name": "memory", "aggregation": "max"},
        "100 * max by (instance) (1 - min_over_time(node_memory_MemAvailable_bytes[5m]) "
        "/ (avg_over_time(node_memory_MemTotal_bytes[5m]) > 0))",
    ),
    (
        {"name": "memory", "aggregation": "max", "source": "RecordingRules"},
        "100 * max by (instance) (max_over_time(instance:node_memory_utilisation:ratio[5m]))",
    ),
    (
        {"name": "diskIO", "aggregation": "p90"},
        "100 * max by (instance) (quantile_over_time(0.9, "
        f"(rate(node_disk_io_time_seconds_total{{{DISKS}}}[1m]))[5m:15s]))",
    ),
    (
        {"name": "diskIO", "aggregation": "p90", "source": "RecordingRules"},
        "100 * max by (instance) (quantile_over_time(0.9, "
        f"instance_device:node_disk_io_time_seconds:rate5m{{{DISKS}}}[5m]))",
    ),
    (
        {"name": "diskSpace", "aggregation": "p99", "timeRange": "10m"},
        "100 * max by (instance) (1 - quantile_over_time(0.01, "
        'node_filesystem_avail_bytes{mountpoint="/"}[10m]) '
        '/ (avg_over_time(node_filesystem_size_bytes{mountpoint="/"}[10m]) > 0))',
    ),
    (
        {"name": "network", "aggregation": "p90", "source": "RecordingRules"},
        # The percentile of the node's sum: the sum of each direction's p90 would overstate it.
        "label_replace(quantile_over_time(0.9, "
        f"(max by (instance) ({RX_RULE}) + max by (instance) ({TX_RULE}))[5m:15s]), "
        '"promsched_unit", "bytes_per_second", "", "")',
    ),
]


@pytest.mark.parametrize(("settings", "expected"), CASES, ids=lambda case: str(case)[:50])
def test_each_builtin_sums_up_its_window_as_asked(settings: dict[str, Any], expected: str) -> None:
    assert plugin(**settings).query == expected


def test_network_takes_the_percentile_of_the_node_traffic_before_dividing_by_the_link() -> None:
    query = plugin(name="network", devices=["eth0"], aggregation="p90").query
    eth0 = 'device=~"^(?:eth0)$"'
    traffic = (
        f"sum by (instance) (max by (instance, device) (rate(node_network_receive_bytes_total{{{eth0}}}[1m]))"
        f" + max by (instance, device) (rate(node_network_transmit_bytes_total{{{eth0}}}[1m])))"
    )
    assert query.startswith(f"quantile_over_time(0.9, ({traffic})[5m:15s]) / on(instance) group_left(")


@pytest.mark.parametrize("name", ["cpu", "memory", "diskIO", "diskSpace", "network"])
def test_avg_is_the_default_and_sends_the_same_query(name: str) -> None:
    default = plugin(name=name)
    assert plugin(name=name, aggregation="avg").query == default.query
    assert "_over_time(" not in default.query.replace("avg_over_time(", "")
    assert default.aggregation is None


@pytest.mark.parametrize(
    ("settings", "aggregation", "window"),
    [
        ({"name": "memory"}, None, 300),
        ({"name": "memory", "aggregation": "avg"}, None, 300),
        ({"name": "memory", "aggregation": "max"}, "max", 0),
        ({"name": "memory", "aggregation": "p90"}, "p90", 30),
        ({"name": "cpu", "aggregation": "max"}, "max", 60),  # its last 1m rate
        ({"name": "cpu", "aggregation": "p90"}, "p90", 90),
        ({"name": "cpu", "aggregation": "p90", "source": "RecordingRules"}, "p90", 330),  # the rule's 5m rate
    ],
)
def test_a_new_load_shows_wholly_after_the_share_of_the_window_the_aggregation_needs(
    settings: dict[str, Any], aggregation: str | None, window: float
) -> None:
    """The herd adjustment counts a recent pod until the value shows it: the mean shows it once it filled
    the window, the highest value at once, the p90 once it filled the window's last tenth."""
    summed_up = plugin(timeRange="5m", **settings)
    assert (summed_up.aggregation, summed_up.window_seconds) == (aggregation, pytest.approx(window))


def test_a_sustained_window_nests_the_plugins_own_subquery() -> None:
    cpu = plugin(name="cpu", aggregation="max", timeRange="2m")
    assert sustained_query(cpu, 300, higher_is_better=False) == f"min_over_time(({cpu.query})[5m:15s])"
