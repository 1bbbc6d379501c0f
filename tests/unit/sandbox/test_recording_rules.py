"""The sandbox's node recording rules (the node mixin's and load-watcher's names) evaluated by promtool:
exact values, `instance` = node name.

Series are labelled as the sandbox's exporter labels them (`instance="<node>:9100"`, its job); the real
node_exporter's series of the machine itself must not become a node. Skipped where promtool (Debian's
`prometheus` package) is not installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from promsched.sandbox.node_metrics.exporting import JOB
from promsched.sandbox.node_metrics.recording_rules import rule_groups

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")

STEPS = "x40"  # 40 samples at 15s: 10 minutes


def _series(metric: str, labels: dict[str, str], values: str) -> dict[str, str]:
    return {
        "series": metric + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}",
        "values": values,
    }


def _counter(metric: str, labels: dict[str, str], per_second: float) -> dict[str, str]:
    return _series(metric, labels, f"0+{per_second * 15}{STEPS}")


def _gauge(metric: str, labels: dict[str, str], value: float) -> dict[str, str]:
    return _series(metric, labels, f"{value}+0{STEPS}")


def _node(
    name: str, busy: float, memory_used: float, io: float, rx: float, tx: float
) -> list[dict[str, str]]:
    labels = {"instance": f"{name}:9100", "job": JOB}
    series = []
    for cpu in "01":
        series.append(_counter("node_cpu_seconds_total", {**labels, "cpu": cpu, "mode": "idle"}, 1 - busy))
        series.append(_counter("node_cpu_seconds_total", {**labels, "cpu": cpu, "mode": "user"}, busy / 2))
        series.append(_counter("node_cpu_seconds_total", {**labels, "cpu": cpu, "mode": "system"}, busy / 2))
    return [
        *series,
        _gauge("node_memory_MemAvailable_bytes", labels, 100 * (1 - memory_used)),
        _gauge("node_memory_MemTotal_bytes", labels, 100),
        _counter("node_disk_io_time_seconds_total", {**labels, "device": "vda"}, io),
        # Not a disk by the node mixin's device pattern: no series of its own.
        _counter("node_disk_io_time_seconds_total", {**labels, "device": "loop0"}, 1.0),
        _counter("node_network_receive_bytes_total", {**labels, "device": "eth0"}, rx),
        _counter("node_network_transmit_bytes_total", {**labels, "device": "eth0"}, tx),
        _counter("node_network_receive_bytes_total", {**labels, "device": "lo"}, 5000),
        _counter("node_network_transmit_bytes_total", {**labels, "device": "lo"}, 5000),
    ]


# The machine's own node_exporter: another job, an address for instance; never a Kubernetes node.
MACHINE = {"instance": "127.0.0.1:41234", "job": "node-exporter"}
INPUT_SERIES = [
    *_node("node-0", busy=0.375, memory_used=0.5, io=0.25, rx=1024, tx=512),
    *_node("node-1", busy=0.0, memory_used=0.125, io=0.0, rx=0, tx=0),
    _counter("node_cpu_seconds_total", {**MACHINE, "cpu": "0", "mode": "idle"}, 0.1),
    _gauge("node_memory_MemAvailable_bytes", MACHINE, 1),
    _gauge("node_memory_MemTotal_bytes", MACHINE, 100),
]

CPU = {"node-0": 0.375, "node-1": 0.0}
RECEIVE = {"node-0": 1024.0, "node-1": 0.0}
TRANSMIT = {"node-0": 512.0, "node-1": 0.0}
EXPECTED: dict[str, dict[str, float]] = {
    # The node mixin's, which promsched reads with source RecordingRules.
    "instance:node_cpu_utilisation:rate5m": CPU,
    "instance:node_memory_utilisation:ratio": {"node-0": 0.5, "node-1": 0.125},
    "instance:node_network_receive_bytes_excluding_lo:rate5m": RECEIVE,
    "instance:node_network_transmit_bytes_excluding_lo:rate5m": TRANSMIT,
    # load-watcher's.
    "instance:node_cpu:ratio": CPU,
    "instance:node_network_receive_bytes:rate:sum": RECEIVE,
    "instance:node_network_transmit_bytes:rate:sum": TRANSMIT,
}


def _labels(metric: str, node: str, **extra: str) -> str:
    labels = {"instance": node, "job": JOB, **extra}
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def test_node_rules_give_each_node_its_load_under_its_node_name(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(rule_groups()))
    tests = [
        {
            "expr": metric,
            "eval_time": "8m",
            "exp_samples": [{"labels": _labels(metric, node), "value": v} for node, v in by_node.items()],
        }
        for metric, by_node in EXPECTED.items()
    ]
    tests.append(
        {
            "expr": "instance_device:node_disk_io_time_seconds:rate5m",
            "eval_time": "8m",
            "exp_samples": [
                {
                    "labels": _labels("instance_device:node_disk_io_time_seconds:rate5m", node, device="vda"),
                    "value": v,
                }
                for node, v in {"node-0": 0.25, "node-1": 0.0}.items()
            ],
        }
    )
    test_file = {
        "rule_files": [str(rules)],
        "evaluation_interval": "15s",
        "tests": [{"interval": "15s", "input_series": INPUT_SERIES, "promql_expr_test": tests}],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(test_file))
    run = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
