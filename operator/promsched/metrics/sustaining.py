"""Values a node held for a whole window: one subquery per plugin over the plugin's own query.

A node counts as hot only when it stayed past a threshold for all of `sustainedFor`, not when one sample
was: the lowest value of the plugin's query over the window (the highest, where higher is better) is
what it held throughout. Reading it from Prometheus' own samples means a restart of the operator
forgets nothing, and a node that cooled for one scrape inside the window is not hot.
"""

from __future__ import annotations

from collections.abc import Sequence

from promsched.metrics import promql
from promsched.metrics.errors import PrometheusError
from promsched.metrics.identifying import Hostnames, NodeDirectory, RoundHostnames, assign_nodes
from promsched.metrics.plugins import Plugin
from promsched.metrics.querying import PrometheusClient


def sustained_query(plugin: Plugin, window_seconds: float, *, higher_is_better: bool) -> str:
    """PromQL for the value each node held for the whole window (a dip of a scrape or two shows)."""
    held = 100 if higher_is_better else 0
    return promql.over_window(held, promql.subquery(plugin.query, window_seconds))


async def sustained_values(
    asked: Sequence[tuple[Plugin, bool]],
    client: PrometheusClient,
    directory: NodeDirectory,
    window_seconds: float,
    *,
    at: float,
    kept: Hostnames | None,
    stale_after: float,
) -> dict[str, dict[str, float]]:
    """plugin -> node -> the value it held for the window ending at `at`, for each (plugin, whether higher
    is better) `asked`, queried one after the other; raises PrometheusError. The plugins that map through
    node_uname_info do so as a refresh's plugins do (`RoundHostnames`): through the hostnames a refresh
    `kept` while they serve, else through node_uname_info asked once for all."""
    hostnames = None
    if any(plugin.identity.uses_hostnames for plugin, _ in asked):
        hostnames = RoundHostnames(client, directory, at, kept, stale_after)
    values: dict[str, dict[str, float]] = {}
    try:
        for plugin, higher_is_better in asked:
            query = sustained_query(plugin, window_seconds, higher_is_better=higher_is_better)
            answer = await client.query(query, at=at)
            mapping = directory
            if hostnames is not None and plugin.identity.uses_hostnames:
                found = await hostnames.directory_for(answer)
                if isinstance(found, PrometheusError):
                    raise found
                mapping = found
            by_node = assign_nodes(answer, plugin.identity, mapping).by_node
            values[plugin.name] = {node: series.value for node, series in by_node.items()}
    finally:
        if hostnames is not None:
            hostnames.cancel()
    return values
