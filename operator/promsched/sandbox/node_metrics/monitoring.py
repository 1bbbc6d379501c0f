"""The sandbox's metrics pipeline: backfilled history, the node-metrics exporter, a real node_exporter
and Prometheus, ready once every node's series are scraped live."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import yaml

from promsched.sandbox.control_plane.clusters import Sandbox, SandboxError, SandboxState
from promsched.sandbox.control_plane.supervising import Process, Report, Supervisor, http_ok, wait_until
from promsched.sandbox.node_metrics import exporting, recording_rules, victoria_metrics
from promsched.sandbox.node_metrics.profiles import LoadProfile, NodeSetup

# The sandbox scrapes, and evaluates its rules, this often by default: a test sees a change within
# seconds. kube-prometheus-stack does both every 30 s, which a benchmark may ask for (`start_metrics`).
SCRAPE_SECONDS = 2
# How far past the backfill the history reaches: Prometheus' start-up and first scrape fit in it (9 s
# measured on 2 busy cores); live samples are accepted from its end on.
HISTORY_LEAD_SECONDS = 15.0
RULES_FILE = "recording-rules.yml"  # in the sandbox folder: the node rules Trimaran's load-watcher reads
PROMETHEUS = "prometheus"
VICTORIAMETRICS = "victoriametrics"
BACKEND_NAMES = {PROMETHEUS: "Prometheus", VICTORIAMETRICS: "VictoriaMetrics with vmalert"}
# The processes each backend runs, as the supervisor names them.
BACKEND_PROCESSES = {
    PROMETHEUS: ("prometheus",),
    VICTORIAMETRICS: (victoria_metrics.SERVER, victoria_metrics.VMALERT),
}


def port_names(backends: Sequence[str]) -> list[str]:
    """The ports the backends listen on. `prometheus` is the sandbox's query endpoint (its
    PROMETHEUS_URL), served by the first backend; each backend also has its own, `metrics:<backend>`,
    so that several can run beside each other on the same exporters (the same port for the first)."""
    names = [f"metrics:{backend}" for backend in backends[1:]]
    return ["prometheus", *names, *(["vmalert"] if VICTORIAMETRICS in backends else [])]


def metrics_url(state: SandboxState, backend: str) -> str:
    """Where `backend` answers the Prometheus HTTP API in the sandbox of `state`."""
    port = state.ports.get(f"metrics:{backend}")
    return state.prometheus_url if port is None else f"http://127.0.0.1:{port}"


def backends_of(recorded: Sequence[str]) -> list[str]:
    """The backends whose processes are among the `recorded` process names, in their order."""
    return [backend for backend, names in BACKEND_PROCESSES.items() if names[0] in recorded]


def default_history(nodes: int) -> float:
    """Seconds of backfilled metric history: past the original plugins' 60-minute network window for
    small sandboxes; shorter for large ones, whose backfill would otherwise take minutes."""
    return 65 * 60.0 if nodes <= 100 else 10 * 60.0


def _prometheus_config(state: SandboxState, scrape_seconds: float) -> dict[str, object]:
    interval = f"{scrape_seconds:g}s"
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(Path(state.directory) / RULES_FILE)],
        "scrape_configs": [
            # One target serves every simulated node; honor_labels keeps each series' own `instance`.
            {
                "job_name": exporting.JOB,
                "honor_labels": True,
                "static_configs": [{"targets": [f"127.0.0.1:{state.ports['exporter']}"]}],
            },
            {
                "job_name": "node-exporter",
                "static_configs": [{"targets": [f"127.0.0.1:{state.ports['node_exporter']}"]}],
            },
        ],
    }


def _prometheus_query(url: str, query: str) -> list[dict[str, object]]:
    data = urllib.parse.urlencode({"query": query}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=data, timeout=5) as response:
        result: list[dict[str, object]] = json.load(response)["data"]["result"]
    return result


def nodes_with_recorded_load(url: str) -> set[str]:
    """The nodes whose load-watcher CPU rule has been evaluated, by the node names Trimaran reads."""
    series = _prometheus_query(url, recording_rules.CPU_RULE)
    return {str(labels["instance"]) for labels in (s["metric"] for s in series) if isinstance(labels, dict)}


def _write_history(
    directory: Path,
    profiles: dict[str, LoadProfile],
    origin: float,
    span: tuple[float, float],
    backends: Sequence[str],
    step: float,
) -> Path:
    """A piece of the history, from `span`'s start to its end, a sample every `step` seconds, as
    OpenMetrics; backfilled into Prometheus' blocks at once when it is among the backends
    (VictoriaMetrics imports it once started)."""
    since, until = span
    path = directory / f"history-{since:.0f}.om"
    exporting.write_history(profiles, since, until, step, path, origin)
    if PROMETHEUS in backends:
        command = ["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(path)]
        result = subprocess.run(
            [*command, str(directory / "prometheus-data")], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise SandboxError(f"promtool could not backfill the metric history: {result.stderr.strip()}")
    return path


def _start_prometheus(sandbox: Sandbox, supervisor: Supervisor, scrape_seconds: float) -> Process:
    directory = sandbox.directory
    (directory / "prometheus.yml").write_text(
        yaml.safe_dump(_prometheus_config(sandbox.state, scrape_seconds), sort_keys=False)
    )
    url = metrics_url(sandbox.state, PROMETHEUS)
    prometheus = supervisor.spawn(
        "prometheus",
        [
            "prometheus",
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'prometheus-data'}",
            f"--web.listen-address={url.removeprefix('http://')}",
            "--storage.tsdb.retention.time=2h",
            "--log.level=warn",
        ],
    )
    wait_until("Prometheus /-/ready", lambda: http_ok(f"{url}/-/ready"), 60, prometheus, supervisor)
    return prometheus


def _start_victoria_metrics(
    sandbox: Sandbox, supervisor: Supervisor, history: list[Path], bin_dir: Path, scrape_seconds: float
) -> Process:
    directory = sandbox.directory
    config = _prometheus_config(sandbox.state, scrape_seconds)
    scrape_configs = config["scrape_configs"]
    assert isinstance(scrape_configs, list)
    victoria_metrics.write_scrape_config(
        directory, victoria_metrics.scrape_config(f"{scrape_seconds:g}s", scrape_configs)
    )
    url = metrics_url(sandbox.state, VICTORIAMETRICS)
    port = int(url.rpartition(":")[2])
    server = victoria_metrics.start_server(supervisor, bin_dir, directory, port)
    wait_until("VictoriaMetrics /health", lambda: http_ok(f"{url}/health"), 60, server, supervisor)
    victoria_metrics.import_history(url, history)
    # Rules are evaluated once the history is in, so none is recorded over the gap before it.
    vmalert = victoria_metrics.start_vmalert(
        supervisor, bin_dir, directory / RULES_FILE, url, sandbox.state.ports["vmalert"], scrape_seconds
    )
    vmalert_url = f"http://127.0.0.1:{sandbox.state.ports['vmalert']}"
    wait_until("vmalert /health", lambda: http_ok(f"{vmalert_url}/health"), 60, vmalert, supervisor)
    return server


def start_metrics(
    sandbox: Sandbox,
    supervisor: Supervisor,
    setups: dict[str, NodeSetup],
    history: float,
    report: Report,
    backends: Sequence[str] = (PROMETHEUS,),
    victoria_metrics_bin: Path | None = None,
    scrape_seconds: float = SCRAPE_SECONDS,
) -> float:
    """Start the metrics pipeline with each of `backends` scraping the same exporters (see
    `port_names`) every `scrape_seconds`, the history sampled as often; returns the time of the first
    live scrape after the history, in the first backend.

    rate() extrapolates to a window's edges only when the nearest sample is within 1.1 scrape intervals
    of the edge; otherwise by half an interval, and a counter's rate reads low. So the backfilled
    history and the live samples meet without a gap (see HISTORY_LEAD_SECONDS), and `ready_at` is a
    scrape's own timestamp: a window ending there has a sample at its end.
    """
    state = sandbox.state
    directory = sandbox.directory
    report(
        f"  {history / 60:.0f} minute(s) of metric history, node-metrics exporter, node_exporter, "
        + ", ".join(BACKEND_NAMES[backend] for backend in backends)
    )
    (directory / "profiles.json").write_text(json.dumps({n: s.load.as_dict() for n, s in setups.items()}))
    history_end = time.time()
    since = history_end - history
    pieces: list[Path] = []
    if history > 0:
        profiles = {n: s.load for n, s in setups.items()}
        span = (since, history_end)
        pieces.append(_write_history(directory, profiles, since, span, backends, scrape_seconds))
        # The history runs on past the backends' first scrape (the counters are a function of time, so
        # samples written ahead equal what the exporter will serve): a gap between the history and the
        # live samples would make rate() read low over every window that starts in it. A backend starts
        # about as slowly as the history was written and backfilled, so that time is added to the lead,
        # once per backend (they start one after the other).
        tail_end = time.time() + HISTORY_LEAD_SECONDS + len(backends) * (time.time() - history_end)
        span = (history_end, tail_end)
        pieces.append(_write_history(directory, profiles, since, span, backends, scrape_seconds))
        history_end = tail_end
    exporter = supervisor.spawn(
        "exporter",
        [
            sys.executable,
            "-m",
            "promsched.sandbox.node_metrics.exporting",
            f"--port={state.ports['exporter']}",
            f"--state={directory / 'profiles.json'}",
            f"--since={since}",
            # It follows the pods running on the nodes and adds their usage to the nodes' series.
            f"--kubeconfig={sandbox.kubeconfig}",
        ],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    node_exporter = supervisor.spawn(
        "node-exporter",
        [
            "prometheus-node-exporter",
            f"--web.listen-address=127.0.0.1:{state.ports['node_exporter']}",
        ],
    )
    (directory / RULES_FILE).write_text(yaml.safe_dump(recording_rules.rule_groups(), sort_keys=False))
    servers: dict[str, Process] = {}
    try:
        for backend in backends:
            if backend == VICTORIAMETRICS:
                assert victoria_metrics_bin is not None, "VictoriaMetrics is built by the launcher"
                servers[backend] = _start_victoria_metrics(
                    sandbox, supervisor, pieces, victoria_metrics_bin, scrape_seconds
                )
            else:
                servers[backend] = _start_prometheus(sandbox, supervisor, scrape_seconds)
    finally:
        for piece in pieces:
            piece.unlink()
    wait_until(
        "the node-metrics exporter",
        lambda: http_ok(f"{state.exporter_url}/profiles"),
        30,
        exporter,
        supervisor,
    )
    wait_until(
        "prometheus-node-exporter",
        lambda: http_ok(f"http://127.0.0.1:{state.ports['node_exporter']}/metrics"),
        30,
        node_exporter,
        supervisor,
    )
    count = len(state.node_names)
    stamps = {
        backend: _wait_live(metrics_url(state, backend), server, supervisor, history_end, count)
        for backend, server in servers.items()
    }
    return stamps[backends[0]]


def _wait_live(url: str, server: Process, supervisor: Supervisor, history_end: float, count: int) -> float:
    """Waits for every node's live samples in the backend at `url`; returns their newest timestamp."""
    idle = f'node_cpu_seconds_total{{job="{exporting.JOB}",cpu="0",mode="idle"}}'

    def scraped_live() -> bool:
        # The backfilled history alone already yields rates, so wait for a scrape newer than it, and
        # for rates of every node (a sandbox without history needs two scrapes for those).
        live = _prometheus_query(url, f"timestamp({idle}) > {history_end:.3f}")
        rates = _prometheus_query(url, f"rate({idle}[1m])")
        return len(live) == count and len(rates) == count

    wait_until(f"live metrics at {url} for {count} node(s)", scraped_live, 90, server, supervisor, 0.5)
    # One target serves every node, so their newest samples share one timestamp.
    (newest,) = _prometheus_query(url, f"min(timestamp({idle}))")
    stamp = newest["value"]
    assert isinstance(stamp, list)
    return float(stamp[1])
