"""The nodes' CPU and memory from the sandbox's Prometheus (the closed-loop exporter's node series): over
a run's window, on a grid of steps, and now, to wait until every node is back at its background load."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

from bench.quality_measures import grid_of, node_of
from promsched.sandbox.control_plane.clusters import SandboxError
from promsched.sandbox.node_metrics.exporting import JOB

MEMORY_QUERY = (
    f'100 * (1 - node_memory_MemAvailable_bytes{{job="{JOB}"}} / node_memory_MemTotal_bytes{{job="{JOB}"}})'
)
BACK_AT_BACKGROUND = 1.0  # percentage points: a node is cleared when this close to its background


def cpu_query(window: str) -> str:
    """Node CPU busy percent: a rate of the idle counter over `window`."""
    idle = f'node_cpu_seconds_total{{job="{JOB}",mode="idle"}}'
    return f"100 * (1 - avg by (instance) (rate({idle}[{window}])))"


def _prometheus(url: str, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
    data = urllib.parse.urlencode(params).encode()
    with urllib.request.urlopen(f"{url}{path}", data=data, timeout=60) as response:
        result: list[dict[str, Any]] = json.load(response)["data"]["result"]
    return result


def node_grids(url: str, start: float, end: float, step: float) -> dict[str, dict[str, list[float]]]:
    """Node CPU and memory (percent) over [start, end] on steps of `step`. CPU is a rate over 5 scrapes
    (10 s), close to what the node used at each step."""
    steps = int((end - start) // step) + 1
    grids = {}
    for key, query in (("cpu", cpu_query("10s")), ("memory", MEMORY_QUERY)):
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        grids[key] = grid_of(_prometheus(url, "/api/v1/query_range", params), start, step, steps)
    return grids


def wait_background(url: str, profiles: dict[str, dict[str, float]], timeout: float) -> float:
    """Wait until every node's CPU (rate over 1 minute, promsched's window) and memory are back within
    BACK_AT_BACKGROUND of its background; returns the seconds waited. Raises past `timeout`."""
    started = time.monotonic()
    off: dict[str, float] = {}
    while time.monotonic() - started < timeout:
        off = {}
        for key, query in (("cpu", cpu_query("1m")), ("memory", MEMORY_QUERY)):
            for series in _prometheus(url, "/api/v1/query", {"query": query}):
                node = node_of(series["metric"]["instance"])
                distance = abs(float(series["value"][1]) - profiles[node][key])
                if distance > BACK_AT_BACKGROUND:
                    off[f"{node} {key}"] = distance
        if not off:
            return time.monotonic() - started
        time.sleep(5)
    worst = sorted(off.items(), key=lambda item: -item[1])[:5]
    raise SandboxError(f"node series not back at their background after {timeout:.0f} s: {worst}")
