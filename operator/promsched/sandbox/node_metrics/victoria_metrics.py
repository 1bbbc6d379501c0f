"""VictoriaMetrics single-node and vmalert as the sandbox's metrics backend (`--metrics victoriametrics`).

VictoriaMetrics scrapes the same targets with the same scrape configuration as the sandbox's Prometheus
(`-promscrape.config`), takes the same backfilled history through its import API, and answers the
Prometheus HTTP API promsched queries. vmalert evaluates the same recording rules against it and writes
the recorded series back into it (remote write).

Two of its defaults would make it answer other than Prometheus for reasons of set-up rather than dialect,
so the sandbox turns them off: `-search.latencyOffset` (30 s: samples younger than that are left out of
an instant query's answer) and vmalert's `-rule.evalDelay` (30 s: rules are evaluated that far back).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

import yaml

from promsched.sandbox.control_plane.supervising import Process, Supervisor

SERVER = "victoria-metrics"
VMALERT = "vmalert"
SCRAPE_CONFIG_FILE = "victoria-metrics-scrape.yml"  # in the sandbox folder
DATA_DIR = "victoria-metrics-data"
_IMPORT_BATCH_BYTES = 16 * 1024 * 1024
_IMPORT_TIMEOUT_SECONDS = 300


def scrape_config(scrape_interval: str, scrape_configs: list[dict[str, object]]) -> dict[str, object]:
    """Prometheus' scrape configuration without its rule settings, which VictoriaMetrics' strict parser
    refuses (vmalert evaluates the rules)."""
    return {"global": {"scrape_interval": scrape_interval}, "scrape_configs": scrape_configs}


def server_command(binary: Path, directory: Path, port: int) -> list[str]:
    return [
        str(binary),
        f"-storageDataPath={directory / DATA_DIR}",
        f"-httpListenAddr=127.0.0.1:{port}",
        f"-promscrape.config={directory / SCRAPE_CONFIG_FILE}",
        # The shortest retention it takes; the backfilled history is an hour old at most.
        "-retentionPeriod=1d",
        "-search.latencyOffset=0s",
        "-loggerLevel=WARN",
    ]


def vmalert_command(
    binary: Path, rules_file: Path, server_url: str, port: int, interval_seconds: float
) -> list[str]:
    return [
        str(binary),
        f"-rule={rules_file}",
        f"-datasource.url={server_url}",
        f"-remoteWrite.url={server_url}",
        f"-evaluationInterval={interval_seconds:g}s",
        "-rule.evalDelay=0s",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-loggerLevel=WARN",
    ]


def prometheus_text(openmetrics: Iterable[str]) -> Iterator[str]:
    """OpenMetrics sample lines (timestamps in seconds) as Prometheus text lines (in milliseconds), which
    VictoriaMetrics' /api/v1/import/prometheus reads; `# EOF` and other comments are dropped."""
    for line in openmetrics:
        if not line or line.startswith("#"):
            continue
        sample, _, stamp = line.rstrip("\n").rpartition(" ")
        yield f"{sample} {round(float(stamp) * 1000)}\n"


def _post(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, data=body, method="POST")
    with urllib.request.urlopen(request, timeout=_IMPORT_TIMEOUT_SECONDS) as response:
        response.read()


def import_history(server_url: str, files: Iterable[Path]) -> None:
    """Import backfilled OpenMetrics files, then make them searchable at once: flush the in-memory
    buffers and drop cached query results that predate the history."""
    for path in files:
        with path.open() as stream:
            batch: list[str] = []
            size = 0
            for line in prometheus_text(stream):
                batch.append(line)
                size += len(line)
                if size >= _IMPORT_BATCH_BYTES:
                    _post(f"{server_url}/api/v1/import/prometheus", "".join(batch).encode())
                    batch, size = [], 0
            if batch:
                _post(f"{server_url}/api/v1/import/prometheus", "".join(batch).encode())
    for action in ("force_flush", "resetRollupResultCache"):
        with urllib.request.urlopen(f"{server_url}/internal/{action}", timeout=30) as response:
            response.read()


def write_scrape_config(directory: Path, config: dict[str, object]) -> None:
    (directory / SCRAPE_CONFIG_FILE).write_text(yaml.safe_dump(config, sort_keys=False))


def start_server(supervisor: Supervisor, bin_dir: Path, directory: Path, port: int) -> Process:
    return supervisor.spawn(SERVER, server_command(bin_dir / SERVER, directory, port))


def start_vmalert(
    supervisor: Supervisor,
    bin_dir: Path,
    rules_file: Path,
    server_url: str,
    port: int,
    interval_seconds: float,
) -> Process:
    return supervisor.spawn(
        VMALERT, vmalert_command(bin_dir / VMALERT, rules_file, server_url, port, interval_seconds)
    )
