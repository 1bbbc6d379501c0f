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


def sustained_query(plugin: Plugin, window_seconds: float, *, higher_is_better: bool) -> str:
    """PromQL for the value each node held for the whole window (a dip of a scrape or two shows)."""
    held = 100 if higher_is_better else 0
    return promql.over_window(held, promql.subquery(plugin.query, window_seconds))


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
