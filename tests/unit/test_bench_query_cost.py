"""bench.query_cost runs end to end against a real Prometheus over backfilled series, and sums a refresh
as promsched sends it."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from bench.query_cost import ASKED_EVERY, measure, refresh_totals

needs_prometheus = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="Prometheus and promtool are not installed",
)


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    """The queries' costs over 3 nodes' series sampled every 2 s, as the sandbox scrapes them."""
    return measure(nodes=3, repeats=1, history=120.0)


@needs_prometheus
def test_every_query_answers_a_series_per_node_and_is_costed(rows: list[dict[str, Any]]) -> None:
    names = [row["query"] for row in rows]
    assert names[:6] == ["cpu", "memory", "diskIO", "diskSpace", "network", "node_uname_info"]
    assert "cpu (joined)" in names
    # The network query as sent now, its link speeds apart, and whole as before.
    assert {"network link speeds", "network (whole)"} <= set(names)
    assert "sustained cpu (joined)" in names
    # The node mixin rules promtool recorded over the history answer too.
    assert {"cpu (rules)", "memory (rules)", "diskIO (rules)", "network (rules)"} <= set(names)
    assert all(row["series"] == 3 for row in rows)
    assert all(row["samples"] >= 3 for row in rows)
    assert all(row["allocated_mb"] > 0 for row in rows)
    assert all(row["json_kb"] >= row["wire_kb"] > 0 for row in rows)
    totals = refresh_totals(rows)
    assert set(totals) == {"now", "whole", "before", "rules"}
    # Five queries every refresh; node_uname_info and the link speeds once per staleAfter.
    assert totals["now"]["queries"] == pytest.approx(5 + 2 / ASKED_EVERY)
    assert totals["whole"]["queries"] == 6


@needs_prometheus
def test_series_sampled_as_kube_prometheus_stack_scrapes_cost_fewer_samples(
    rows: list[dict[str, Any]],
) -> None:
    every_30s = {row["query"]: row for row in measure(nodes=3, repeats=1, history=120.0, scrape_seconds=30.0)}

    for row in rows:
        sparse = every_30s[row["query"]]
        assert sparse["series"] == row["series"]
        # A range over 2 minutes reads 4 samples of a series instead of 60; an instant one reads one.
        assert sparse["samples"] <= row["samples"]
    assert every_30s["cpu"]["samples"] * 10 < next(r for r in rows if r["query"] == "cpu")["samples"]
    assert every_30s["node_uname_info"]["samples"] == 3


def row(query: str, cpu_ms: float) -> dict[str, Any]:
    return {
        "query": query,
        "series": 1,
        "samples": 100,
        "wire_kb": 1.0,
        "json_kb": 2.0,
        "cpu_ms": cpu_ms,
        "allocated_mb": 1.0,
    }


def test_a_refresh_now_counts_the_link_speeds_and_node_uname_info_once_per_stale_after() -> None:
    rows = [
        row("cpu", 10.0),
        row("diskSpace", 5.0),
        row("network", 20.0),
        row("node_uname_info", 4.0),
        row("network link speeds", 80.0),
        row("network (whole)", 100.0),
        row("cpu (joined)", 30.0),
        row("sustained cpu", 1000.0),
        row("cpu (rules)", 3.0),
    ]

    totals = refresh_totals(rows)

    assert totals["now"]["cpu_ms"] == pytest.approx(10 + 5 + 20 + (4 + 80) / ASKED_EVERY)
    assert totals["whole"]["cpu_ms"] == pytest.approx(10 + 5 + 100 + 4)
    assert totals["before"]["cpu_ms"] == pytest.approx(30)
    assert totals["rules"]["cpu_ms"] == pytest.approx(3 + 5)
    assert totals["whole"]["json_kb"] == pytest.approx(4 * 2.0)
