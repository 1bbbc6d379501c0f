"""Values a node held for a whole window: one subquery per plugin over the plugin's own query.

A node counts as hot only when it stayed past a threshold for all of `sustainedFor`, not when one sample
was: the lowest value of the plugin's query over the window (the highest, where higher is better) is
what it held throughout. Reading it from Prometheus' own samples means a restart of the operator
forgets nothing, and a node that cooled for one scrape inside the window is not hot.
"""

from __future__ import annotations

from promsched.metrics import promql
from promsched.metrics.identifying import NodeDirectory, assign_nodes
from promsched.metrics.plugins import Plugin
from promsched.metrics.querying import PrometheusClient

# The subquery evaluates the plugin's query this often over the window: often enough that a dip of a
# scrape interval or two shows, few enough points to stay cheap at 5000 nodes.
MIN_STEP_SECONDS = 15.0
STEPS_PER_WINDOW = 20


def sustained_query(plugin: Plugin, window_seconds: float, *, higher_is_better: bool) -> str:
    """PromQL for the value each node held for the whole window."""
    step = max(MIN_STEP_SECONDS, window_seconds / STEPS_PER_WINDOW)
    held = "max_over_time" if higher_is_better else "min_over_time"
    return f"{held}(({plugin.query})[{promql.duration(window_seconds)}:{promql.duration(step)}])"


async def sustained_values(
    plugin: Plugin,
    client: PrometheusClient,
    directory: NodeDirectory,
    window_seconds: float,
    *,
    higher_is_better: bool,
    at: float,
) -> dict[str, float]:
    """node -> the value it held for the window ending at `at`; raises PrometheusError. For a plugin
    that maps through node_uname_info, `directory` carries its hostnames (`resolve_hostnames`)."""
    result = await client.query(
        sustained_query(plugin, window_seconds, higher_is_better=higher_is_better), at=at
    )
    return {
        node: series.value
        for node, series in assign_nodes(result, plugin.identity, directory).by_node.items()
    }
