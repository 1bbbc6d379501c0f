"""Reading the /metrics pages the benches count from: Prometheus's own count of the queries it answered,
promsched's mean decision and binding times, and the informational writes promsched dropped."""

from __future__ import annotations

import urllib.request

from bench.histograms import Buckets, scraped
from bench.requestcounts import by_label


def metrics_text(url: str) -> str:
    """The /metrics page of the server at `url`."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text: str = response.read().decode()
    return text


def prometheus_queries(url: str, handlers: tuple[str, ...] = ("/api/v1/query",)) -> float:
    """Prometheus's own count of the queries it answered on `handlers` (default: instant queries, GET and
    POST /api/v1/query)."""
    wanted = tuple(f'handler="{handler}"' for handler in handlers)
    total = 0.0
    for line in metrics_text(url).splitlines():
        if line.startswith("prometheus_http_requests_total{") and any(h in line for h in wanted):
            total += float(line.rsplit(" ", 1)[1])
    return total


def answered_plugins(url: str) -> set[str]:
    """The plugins whose queries Prometheus has answered since promsched started (each sets its
    promsched_metric_age_seconds once it has samples)."""
    return set(by_label(metrics_text(url), "promsched_metric_age_seconds", "plugin"))


def promsched_timings(url: str | None) -> dict[str, float]:
    """promsched's mean decision time (filter and score one pod) and binding time, from its /metrics."""
    if url is None:
        return {}
    sums: dict[str, float] = {}
    for line in metrics_text(url).splitlines():
        name, _, value = line.partition(" ")
        for metric in ("promsched_scheduling_attempt_duration_seconds", "promsched_binding_duration_seconds"):
            for suffix in ("_sum", "_count"):
                if name.startswith(metric + suffix) and ('result="bound"' in name or "binding" not in metric):
                    sums[metric + suffix] = sums.get(metric + suffix, 0.0) + float(value)
    found = {}
    for metric, key in (
        ("promsched_scheduling_attempt_duration_seconds", "decide_ms_mean"),
        ("promsched_binding_duration_seconds", "bind_ms_mean"),
    ):
        count = sums.get(metric + "_count", 0.0)
        if count:
            found[key] = 1000 * sums.get(metric + "_sum", 0.0) / count
    return found


LOOP_LAG = "promsched_event_loop_lag_seconds"


def loop_lag(url: str | None) -> tuple[Buckets, Buckets]:
    """promsched's `promsched_event_loop_lag_seconds` buckets now: all of them, and those observed while a
    metrics refresh ran (none without a /metrics)."""
    if url is None:
        return [], []
    text = metrics_text(url)
    return scraped(text, LOOP_LAG), scraped(text, LOOP_LAG, {"during_refresh": "true"})


def dropped_writes(url: str | None) -> dict[str, float]:
    """promsched's count of the informational writes (events, conditions) it dropped, by kind."""
    if url is None:
        return {}
    return by_label(metrics_text(url), "promsched_api_writes_dropped_total", "kind")
