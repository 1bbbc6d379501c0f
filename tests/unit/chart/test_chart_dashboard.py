"""The Grafana dashboard only charts metrics the operator exports."""

from __future__ import annotations

import json
from pathlib import Path

from support.metric_names import exported_series, promsched_series_in

DASHBOARD = Path(__file__).parents[3] / "charts" / "promsched" / "dashboards" / "promsched.json"


def test_every_series_the_dashboard_queries_is_exported() -> None:
    queries = [
        target["expr"]
        for panel in json.loads(DASHBOARD.read_text())["panels"]
        for target in panel.get("targets", [])
    ]
    used = promsched_series_in(queries)
    assert used, "the dashboard queries no promsched metric"
    assert used - exported_series() == set()
