"""Values a node held for a whole window: one subquery per plugin over the plugin's own query.

A node counts as hot only when it stayed past a threshold for all of `sustainedFor`, not when one sample
was: the lowest value of the plugin's query over the window (the highest, where higher is better) is
what it held throughout. Reading it from Prometheus' own samples means a restart of the operator
forgets nothing, and a node that cooled for one scrape inside the window is not hot.
"""

from __future__ import annotations

from collections.abc import Sequence

from promsched.metrics import promql
from promsched.metrics.identifying import Hostnames, NodeDirectory, assign_nodes, resolve_hostnames
from promsched.metrics.plugins import Plugin
from promsched.metrics.querying import PrometheusClient
from promsched.metrics.samples import QueryResult


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
    node_uname_info use the hostnames a refresh `kept` while usable for `directory` at `at` and naming
    every instance their answers do (as a refresh would), else node_uname_info asked once for all."""
    answers: dict[str, QueryResult] = {}
    for plugin, higher_is_better in asked:
        query = sustained_query(plugin, window_seconds, higher_is_better=higher_is_better)
        answers[plugin.name] = await client.query(query, at=at)
    mapped = [answers[plugin.name] for plugin, _ in asked if plugin.identity.uses_hostnames]
    if mapped:
        if kept is not None and kept.usable_for(directory, at, stale_after) and all(map(kept.cover, mapped)):
            directory = kept.directory
        else:
            directory = await resolve_hostnames(client, directory, at)
    return {
        plugin.name: {
            node: series.value
            for node, series in assign_nodes(answers[plugin.name], plugin.identity, directory).by_node.items()
        }
        for plugin, _ in asked
    }
