"""bench.query_cost runs end to end against a real Prometheus over backfilled series."""

from __future__ import annotations

import shutil

import pytest
from bench.query_cost import measure, refresh_totals

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="Prometheus and promtool are not installed",
)


def test_every_query_answers_a_series_per_node_and_is_costed() -> None:
    rows = measure(nodes=3, repeats=1, history=120.0)

    names = [row["query"] for row in rows]
    assert names[:6] == ["cpu", "memory", "diskIO", "diskSpace", "network", "node_uname_info"]
    assert "cpu (joined)" in names
    assert "sustained cpu (joined)" in names
    # The node mixin rules promtool recorded over the history answer too.
    assert {"cpu (rules)", "memory (rules)", "diskIO (rules)", "network (rules)"} <= set(names)
    assert all(row["series"] == 3 for row in rows)
    assert all(row["allocated_mb"] > 0 for row in rows)
    totals = refresh_totals(rows)
    assert set(totals) == {"now", "before", "rules"}
