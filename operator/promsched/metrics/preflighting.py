"""Preflight: every plugin query once, reported in the shape of ``status.preflight``.

It says which queries Prometheus rejects (with Prometheus's own error text) and which nodes a working
query has no usable series for (none at all, or several, see `SeriesReport`), with the first series it
could map to no node: a node identity that does not fit shows there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import UTC, datetime

from promsched.api.statuses import MissingSeries, Preflight, PreflightQuery
from promsched.metrics.engines import engine_of
from promsched.metrics.errors import PrometheusError, PrometheusQueryError
from promsched.metrics.identifying import EXAMPLES_KEPT, NodeDirectory
from promsched.metrics.planning import Plan
from promsched.metrics.querying import PrometheusClient
from promsched.metrics.refreshing import take_snapshot
from promsched.metrics.snapshots import Snapshot

_ERROR_CHARS = 1024  # status.preflight.queries[].error's limit
UNMATCHED_SHOWN = 5  # status.preflight.missingSeries[].unmatchedSeries's limit
WARNINGS_SHOWN = 5  # status.preflight.queries[].warnings's limit


def _error_text(error: PrometheusError) -> str:
    text = f"{error.error_type}: {error.error}" if isinstance(error, PrometheusQueryError) else error.message
    return text[:_ERROR_CHARS]


def preflight_report(snapshot: Snapshot, nodes: Iterable[str], engine: str | None = None) -> Preflight:
    """The preflight status for a snapshot that has just been taken, by the `engine` (`engines.engine_of`)
    where known."""
    names = sorted(set(nodes))
    queries = []
    missing = []
    for name, plugin_snapshot in snapshot.plugins.items():
        error = plugin_snapshot.error
        warnings = plugin_snapshot.report.warnings
        queries.append(
            PreflightQuery(
                plugin=name,
                query=plugin_snapshot.plugin.query,
                aggregation=plugin_snapshot.plugin.aggregation,
                ok=error is None,
                error=None if error is None else _error_text(error),
                warnings=[text[:_ERROR_CHARS] for text in warnings[:WARNINGS_SHOWN]] or None,
            )
        )
        if error is None:
            without = [node for node in names if node not in plugin_snapshot.samples]
            if without:
                unmatched = list(plugin_snapshot.report.unmatched[:UNMATCHED_SHOWN])
                missing.append(
                    MissingSeries(
                        plugin=name,
                        nodes=without[:EXAMPLES_KEPT],
                        count=len(without),
                        unmatched_series=unmatched,
                    )
                )
    return Preflight(
        checked_at=datetime.fromtimestamp(snapshot.taken_at, UTC),
        engine=engine,
        queries=queries,
        missing_series=missing,
    )


async def preflight(plan: Plan, client: PrometheusClient, directory: NodeDirectory) -> Preflight:
    """Run every query of `plan` once and report failures, warnings, nodes without series and the engine
    that answered."""
    snapshot, engine = await asyncio.gather(take_snapshot(plan, client, directory), engine_of(client))
    return preflight_report(snapshot, directory.names, engine)
