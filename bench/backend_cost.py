"""What one refresh of promsched costs on VictoriaMetrics beside Prometheus, without a cluster:

    python -m bench.backend_cost [--nodes 1000] [--repeats 5] [--history 300]

Both engines get the same history: the sandbox exporter's node_exporter series for `--nodes` nodes, one
sample every 2 s for `--history` seconds (Prometheus through promtool's backfill, VictoriaMetrics
v1.151.0 through its import API; `promsched sandbox install --with victoriametrics` builds it). Each
query of a refresh as promsched sends it (the benchmark policy's plugins and node_uname_info, as
`bench.query_cost` names them), and the rebalancer's sustained cpu query, is asked `--repeats` times at
the history's end, one at a time. Per query: series answered, bytes on the wire (gzip, as promsched
asks) and decoded, the engine's CPU (its /proc stat) and memory allocated (go_memstats_alloc_bytes_total),
and promsched's CPU to send it and read the answer (its own PrometheusClient, process time). The data
sit in persisted blocks (Prometheus) or flushed parts (VictoriaMetrics) and VictoriaMetrics' result
cache is off, so repeats cost what a fresh refresh would: the figures compare engines, not machines.
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import commanding
from bench.query_cost import UNAME, Prometheus, every_refresh, queries
from promsched.metrics import PrometheusClient, PrometheusEndpoint
from promsched.sandbox.builds import installing
from promsched.sandbox.control_plane.supervising import free_port, http_ok, wait_until
from promsched.sandbox.node_metrics import exporting, victoria_metrics
from promsched.sandbox.node_metrics.monitoring import PROMETHEUS, SCRAPE_SECONDS, VICTORIAMETRICS
from promsched.sandbox.node_metrics.profiles import LoadProfile

KEYS = ("wire_kb", "json_kb", "engine_cpu_ms", "engine_allocated_mb", "promsched_cpu_ms")
# Below this share of a core the engine is taken to have finished what the import left it to do.
_QUIET_SHARE = 0.02
_ALLOCATIONS_LAG_SECONDS = 1.0  # measured: half a second was enough


class VictoriaMetrics(Prometheus):
    """VictoriaMetrics single-node over the imported history, with no scrapes and no result cache."""

    def __init__(self, directory: Path, history: Path, binary: Path) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self.process = subprocess.Popen(
            [
                str(binary),
                f"-storageDataPath={directory / 'victoria-metrics-data'}",
                f"-httpListenAddr={self.url.removeprefix('http://')}",
                "-retentionPeriod=100y",
                "-search.latencyOffset=0s",
                "-search.disableCache",
                "-loggerLevel=ERROR",
            ]
        )
        wait_until("VictoriaMetrics /health", lambda: http_ok(f"{self.url}/health"), 120)
        victoria_metrics.import_history(self.url, [history])
        self._settle()

    def allocated_bytes(self) -> float:
        # Its go_memstats_alloc_bytes_total comes from runtime/metrics, which counts small allocations
        # as their spans are handed back: read at once, the last query's are not in it yet.
        time.sleep(_ALLOCATIONS_LAG_SECONDS)
        return super().allocated_bytes()

    def _settle(self, deadline_seconds: float = 300.0) -> None:
        """Waits until the engine idles: merging what was imported would be counted as query CPU."""
        deadline = time.monotonic() + deadline_seconds
        while time.monotonic() < deadline:
            before = self.cpu_seconds()
            time.sleep(1.0)
            if self.cpu_seconds() - before < _QUIET_SHARE:
                return


def _promsched_cpu_seconds(url: str, expression: str, at: float, repeats: int) -> float:
    """promsched's own CPU per query: its client sending it and reading the answer into a result."""

    async def ask() -> float:
        async with PrometheusClient(PrometheusEndpoint(url, timeout_seconds=300)) as client:
            await client.query(expression, at=at)  # the connection opened first
            started = time.process_time()
            for _ in range(repeats):
                await client.query(expression, at=at)
            return (time.process_time() - started) / repeats

    return asyncio.run(ask())


def refresh_queries() -> dict[str, str]:
    """The queries of a refresh as promsched sends them (node_uname_info as when it is asked), and the
    rebalancer's sustained cpu."""
    return {
        name: expression
        for name, expression in queries().items()
        if every_refresh(name) or name in (UNAME, "sustained cpu")
    }


def measure_engine(engine: Prometheus, at: float, repeats: int) -> list[dict[str, Any]]:
    rows = []
    for name, expression in refresh_queries().items():
        series = engine.query(expression, at)  # once first: its data paged in
        cpu, allocated = engine.cpu_seconds(), engine.allocated_bytes()
        for _ in range(repeats):
            engine.query(expression, at)
        engine_cpu = (engine.cpu_seconds() - cpu) / repeats
        engine_allocated = (engine.allocated_bytes() - allocated) / repeats
        wire, decoded = engine.answer_sizes(expression, at)
        rows.append(
            {
                "query": name,
                "series": series,
                "wire_kb": wire / 1e3,
                "json_kb": decoded / 1e3,
                "engine_cpu_ms": 1000 * engine_cpu,
                "engine_allocated_mb": engine_allocated / 1e6,
                "promsched_cpu_ms": 1000 * _promsched_cpu_seconds(engine.url, expression, at, repeats),
            }
        )
    return rows


def measure(nodes: int, repeats: int, history: float = 300.0) -> dict[str, list[dict[str, Any]]]:
    """Rows per engine, one per query (means of `repeats`)."""
    binary = installing.install_victoriametrics(commanding.report_line) / victoria_metrics.SERVER
    with tempfile.TemporaryDirectory(prefix="promsched-backend-cost-") as workdir:
        directory = Path(workdir)
        until = time.time()
        profiles = {f"node-{index}": LoadProfile() for index in range(nodes)}
        openmetrics = directory / "history.om"
        exporting.write_history(profiles, until - history, until, SCRAPE_SECONDS, openmetrics)
        backfill = ["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet"]
        subprocess.run([*backfill, str(openmetrics), str(directory / "data")], check=True)
        at = until - SCRAPE_SECONDS
        results = {}
        for backend in (PROMETHEUS, VICTORIAMETRICS):
            engine = (
                Prometheus(directory)
                if backend == PROMETHEUS
                else VictoriaMetrics(directory, openmetrics, binary)
            )
            try:
                results[backend] = measure_engine(engine, at, repeats)
            finally:
                engine.stop()
        return results


def refresh_total(rows: list[dict[str, Any]]) -> dict[str, float]:
    """One refresh: every query but the rebalancer's (which runs once per rebalance cycle)."""
    chosen = [row for row in rows if not row["query"].startswith("sustained")]
    return {"queries": len(chosen), **{key: sum(row[key] for row in chosen) for key in KEYS}}


COLUMNS = ("series", *KEYS)
HEADER = ("engine", "query", "series", "wire kB", "JSON kB", "engine CPU ms", "engine MB allocated")


def _cell(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def markdown(nodes: int, results: dict[str, list[dict[str, Any]]]) -> str:
    lines = [
        f"### {nodes} nodes",
        "",
        "| " + " | ".join((*HEADER, "promsched CPU ms")) + " |",
        "|" + " --- |" * (len(HEADER) + 1),
    ]
    for backend, rows in results.items():
        for row in [*rows, {"query": "**a refresh**", "series": "", **refresh_total(rows)}]:
            cells = [backend, row["query"], *(_cell(row[key]) for key in COLUMNS)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = commanding.parser(__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--history", type=float, default=300.0, help="seconds of node series (default 300)")
    args = parser.parse_args()
    print(markdown(args.nodes, measure(args.nodes, args.repeats, args.history)))


if __name__ == "__main__":
    main()
