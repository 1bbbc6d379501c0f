"""bench.backend_cost runs end to end against a real Prometheus and VictoriaMetrics over the same
backfilled series."""

from __future__ import annotations

import os
import shutil

import pytest
from bench.backend_cost import markdown, measure, refresh_queries, refresh_total

from promsched.sandbox.builds.components import victoriametrics_bin_dir

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None
    or shutil.which("promtool") is None
    or not os.access(victoriametrics_bin_dir() / "victoria-metrics", os.X_OK),
    reason="Prometheus, promtool or VictoriaMetrics (sandbox install --with victoriametrics) missing",
)


def test_a_refresh_is_what_promsched_sends_now_and_the_rebalancers_query() -> None:
    names = list(refresh_queries())
    assert names == ["cpu", "memory", "diskIO", "diskSpace", "network", "node_uname_info", "sustained cpu"]


def test_both_engines_answer_every_query_with_a_series_per_node_and_are_costed() -> None:
    results = measure(nodes=3, repeats=1, history=120.0)

    assert list(results) == ["prometheus", "victoriametrics"]
    for engine, rows in results.items():
        assert [row["query"] for row in rows] == list(refresh_queries()), engine
        assert all(row["series"] == 3 for row in rows), engine
        assert all(row["json_kb"] >= row["wire_kb"] > 0 for row in rows), engine
        assert all(row["engine_allocated_mb"] > 0 and row["promsched_cpu_ms"] > 0 for row in rows), engine
        assert refresh_total(rows)["queries"] == 6
    table = markdown(3, results)
    assert table.count("**a refresh**") == 2
