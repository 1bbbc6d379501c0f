"""The series names the operator exports (from promsched.scheduling.telemetry), for checking what the
chart's dashboard and alerts query."""

from __future__ import annotations

import re

from prometheus_client.metrics import MetricWrapperBase

from promsched.scheduling import telemetry


def exported_series() -> set[str]:
    names = set()
    for metric in vars(telemetry).values():
        if isinstance(metric, MetricWrapperBase):
            for family in metric.describe():
                for suffix in ("", "_total", "_bucket", "_count", "_sum", "_created"):
                    names.add(family.name + suffix)
    return names


def promsched_series_in(queries: list[str]) -> set[str]:
    """The promsched_* series the PromQL `queries` read."""
    return {name for query in queries for name in re.findall(r"\bpromsched_[a-z_]+", query)}
