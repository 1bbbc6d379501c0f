"""The Grafana dashboard only charts metrics the operator exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from promsched.scheduling import telemetry

DASHBOARD = Path(__file__).parents[3] / "charts" / "promsched" / "dashboards" / "promsched.json"


def exported_series() -> set[str]:
    names = set()
    for metric in vars(telemetry).values():
        if isinstance(metric, MetricWrapperBase):
            for family in metric.describe():
                for suffix in ("", "_total", "_bucket", "_count", "_sum", "_created"):
                    names.add(family.name + suffix)
    return names


def test_every_series_the_dashboard_queries_is_exported() -> None:
    queries = [
        target["expr"]
        for panel in json.loads(DASHBOARD.read_text())["panels"]
        for target in panel.get("targets", [])
    ]
    used = {name for query in queries for name in re.findall(r"\bpromsched_[a-z_]+", query)}
    assert used, "the dashboard queries no promsched metric"
    assert used - exported_series() == set()
