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
from pathlib import Path

import yaml

from promsched.sandbox.control_plane.clusters import Sandbox, SandboxError, SandboxState
from promsched.sandbox.control_plane.supervising import Report, Supervisor, http_ok, wait_until
from promsched.sandbox.node_metrics import exporting, recording_rules
from promsched.sandbox.node_metrics.profiles import LoadProfile, NodeSetup

SCRAPE_SECONDS = 2
# How far past the backfill the history reaches: Prometheus' start-up and first scrape fit in it (9 s
# measured on 2 busy cores); live samples are accepted from its end on.
HISTORY_LEAD_SECONDS = 15.0
RULES_FILE = "recording-rules.yml"  # in the sandbox folder: the node rules Trimaran's load-watcher reads


def default_history(nodes: int) -> float:
    """Seconds of backfilled metric history: past the original plugins' 60-minute network window for
    small sandboxes; shorter for large ones, whose backfill would otherwise take minutes."""
    return 65 * 60.0 if nodes <= 100 else 10 * 60.0


def _prometheus_config(state: SandboxState) -> dict[str, object]:
    return {
        "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": f"{SCRAPE_SECONDS}s"},
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


def _backfill(
    directory: Path, profiles: dict[str, LoadProfile], origin: float, since: float, until: float
) -> None:
    backfill = directory / "history.om"
    exporting.write_history(profiles, since, until, SCRAPE_SECONDS, backfill, origin)
    command = ["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(backfill)]
    result = subprocess.run(
        [*command, str(directory / "prometheus-data")], capture_output=True, text=True, check=False
    )
    backfill.unlink()
    if result.returncode != 0:
        raise SandboxError(f"promtool could not backfill the metric history: {result.stderr.strip()}")


def start_metrics(
    sandbox: Sandbox, supervisor: Supervisor, setups: dict[str, NodeSetup], history: float, report: Report
) -> float:
    """Start the metrics pipeline; returns the time of the first live scrape after the history.

    rate() extrapolates to a window's edges only when the nearest sample is within 1.1 scrape intervals
    of the edge; otherwise by half an interval, and a counter's rate reads low. So the backfilled
    history and the live samples meet without a gap (see HISTORY_LEAD_SECONDS), and `ready_at` is a
    scrape's own timestamp: a window ending there has a sample at its end.
    """
    state = sandbox.state
    directory = sandbox.directory
    report(
        f"  {history / 60:.0f} minute(s) of metric history, node-metrics exporter, node_exporter, Prometheus"
    )
    (directory / "profiles.json").write_text(json.dumps({n: s.load.as_dict() for n, s in setups.items()}))
    history_end = time.time()
    since = history_end - history
    if history > 0:
        profiles = {n: s.load for n, s in setups.items()}
        _backfill(directory, profiles, since, since, history_end)
        # The history runs on past Prometheus' first scrape (the counters are a function of time, so
        # samples written ahead equal what the exporter will serve): a gap between the history and the
        # live samples would make rate() read low over every window that starts in it. Prometheus
        # starts about as slowly as the backfill was written, so that time is added to the lead.
        tail_end = time.time() + HISTORY_LEAD_SECONDS + (time.time() - history_end)
        _backfill(directory, profiles, since, history_end, tail_end)
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
    (directory / "prometheus.yml").write_text(yaml.safe_dump(_prometheus_config(state), sort_keys=False))
    prometheus = supervisor.spawn(
        "prometheus",
        [
            "prometheus",
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{state.ports['prometheus']}",
            "--storage.tsdb.retention.time=2h",
            "--log.level=warn",
        ],
    )
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
    wait_until(
        "Prometheus /-/ready", lambda: http_ok(f"{state.prometheus_url}/-/ready"), 60, prometheus, supervisor
    )
    count = len(state.node_names)
    idle = f'node_cpu_seconds_total{{job="{exporting.JOB}",cpu="0",mode="idle"}}'

    def scraped_live() -> bool:
        # The backfilled history alone already yields rates, so wait for a scrape newer than it, and
        # for rates of every node (a sandbox without history needs two scrapes for those).
        live = _prometheus_query(state.prometheus_url, f"timestamp({idle}) > {history_end:.3f}")
        rates = _prometheus_query(state.prometheus_url, f"rate({idle}[1m])")
        return len(live) == count and len(rates) == count

    wait_until(
        f"live metrics in Prometheus for {count} node(s)", scraped_live, 90, prometheus, supervisor, 0.5
    )
    # One target serves every node, so their newest samples share one timestamp.
    (newest,) = _prometheus_query(state.prometheus_url, f"min(timestamp({idle}))")
    stamp = newest["value"]
    assert isinstance(stamp, list)
    return float(stamp[1])
