"""The plugins' PromQL evaluated by promtool over known series: exact values, not just syntax.

Two nodes scraped every 15s; values are chosen so each plugin's answer is exact. Skipped where promtool
(Debian's `prometheus` package) is not installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kube_prometheus_stack as kps
import pytest
import yaml

from promsched.api.plugin_specs import PluginSpec
from promsched.api.policies import NodeIdentity as NodeIdentitySpec
from promsched.api.policies import NodeIdentitySource
from promsched.metrics import NodeIdentity, promql
from promsched.metrics.identifying import UNAME_QUERY
from promsched.metrics.plugins import build_plugin
from promsched.sandbox.node_metrics.recording_rules import node_mixin_expressions
from support.promtool import assert_evaluates_to, counter, gauge

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")

A = {"instance": "a:9100", "job": "node"}
B = {"instance": "b:9100", "job": "node"}

INPUT_SERIES = [
    # node A: idle 0.75 s/s on both CPUs (25% busy); node B: 0.5 (50% busy)
    *(counter("node_cpu_seconds_total", {**A, "cpu": cpu, "mode": "idle"}, 0.75) for cpu in "01"),
    *(counter("node_cpu_seconds_total", {**A, "cpu": cpu, "mode": "user"}, 0.25) for cpu in "01"),
    *(counter("node_cpu_seconds_total", {**B, "cpu": cpu, "mode": "idle"}, 0.5) for cpu in "01"),
    gauge("node_memory_MemAvailable_bytes", A, 25),
    gauge("node_memory_MemTotal_bytes", A, 100),
    gauge("node_memory_MemAvailable_bytes", B, 50),
    gauge("node_memory_MemTotal_bytes", B, 100),
    counter("node_disk_io_time_seconds_total", {**A, "device": "vda"}, 0.5),
    counter("node_disk_io_time_seconds_total", {**A, "device": "loop0"}, 1.0),  # not a disk by the pattern
    counter("node_disk_io_time_seconds_total", {**B, "device": "vda"}, 0.25),
    counter("node_disk_io_time_seconds_total", {**B, "device": "sda"}, 0.125),
    gauge("node_filesystem_avail_bytes", {**A, "device": "/dev/vda1", "mountpoint": "/"}, 40),
    gauge("node_filesystem_size_bytes", {**A, "device": "/dev/vda1", "mountpoint": "/"}, 100),
    gauge("node_filesystem_avail_bytes", {**A, "device": "/dev/vda2", "mountpoint": "/boot"}, 1),
    gauge("node_filesystem_size_bytes", {**A, "device": "/dev/vda2", "mountpoint": "/boot"}, 100),
    gauge("node_filesystem_avail_bytes", {**B, "device": "/dev/vda1", "mountpoint": "/"}, 75),
    gauge("node_filesystem_size_bytes", {**B, "device": "/dev/vda1", "mountpoint": "/"}, 100),
    # node A: 100 + 100 B/s on eth0 at a link speed of 1000 B/s; lots on lo, which is not selected
    counter("node_network_receive_bytes_total", {**A, "device": "eth0"}, 100),
    counter("node_network_transmit_bytes_total", {**A, "device": "eth0"}, 100),
    counter("node_network_receive_bytes_total", {**A, "device": "lo"}, 10000),
    counter("node_network_transmit_bytes_total", {**A, "device": "lo"}, 10000),
    gauge("node_network_speed_bytes", {**A, "device": "eth0"}, 1000),
    # node B: 200 B/s and no link speed
    counter("node_network_receive_bytes_total", {**B, "device": "eth0"}, 200),
    counter("node_network_transmit_bytes_total", {**B, "device": "eth0"}, 0),
    gauge("node_uname_info", {**A, "nodename": "node-a"}, 1),
    gauge("node_uname_info", {**A, "job": "node-again", "nodename": "node-a"}, 1),  # scraped twice
    gauge("node_uname_info", {**B, "nodename": "node-b"}, 1),
    gauge("gpu_util", {**A, "gpu": "0"}, 30),
    gauge("gpu_util", {**A, "gpu": "1"}, 50),
    gauge("gpu_free", {"Hostname": "node-b"}, 3),
]

UNAME = NodeIdentity(NodeIdentitySource.UNAME_NODENAME)
BY_INSTANCE = NodeIdentity.from_spec(NodeIdentitySpec(source=NodeIdentitySource.LABEL, label="instance"))
# UnameNodename's queries keep `instance`: node_uname_info is asked once for all (test_uname_query_...).
NODE_A = {"instance": "a:9100"}
NODE_B = {"instance": "b:9100"}

CASES: list[tuple[dict[str, Any], NodeIdentity, list[tuple[dict[str, str], float]]]] = [
    ({"name": "cpu", "timeRange": "0s"}, UNAME, [(NODE_A, 25), (NODE_B, 50)]),
    (
        {"name": "cpu", "timeRange": "2m"},
        BY_INSTANCE,
        [({"instance": "a:9100"}, 25), ({"instance": "b:9100"}, 50)],
    ),
    ({"name": "memory", "timeRange": "5m"}, UNAME, [(NODE_A, 75), (NODE_B, 50)]),
    ({"name": "memory", "timeRange": "0s"}, UNAME, [(NODE_A, 75), (NODE_B, 50)]),
    ({"name": "diskIO", "timeRange": "1m"}, UNAME, [(NODE_A, 50), (NODE_B, 25)]),
    ({"name": "diskSpace", "timeRange": "0s"}, UNAME, [(NODE_A, 60), (NODE_B, 25)]),
    ({"name": "diskSpace", "timeRange": "5m", "mountpoint": "/boot"}, UNAME, [(NODE_A, 99)]),
    (
        {"name": "network", "devices": ["eth0"], "timeRange": "1m"},
        UNAME,
        [
            ({**NODE_A, "promsched_unit": "percent"}, 20),
            ({**NODE_B, "promsched_unit": "bytes_per_second"}, 200),
        ],
    ),
    ({"name": "gpu", "query": "avg by (instance) (gpu_util)"}, UNAME, [(NODE_A, 40)]),
    (
        {"name": "gpuFree", "query": "gpu_free", "nodeLabel": "Hostname"},
        UNAME,
        [({"__name__": "gpu_free", "Hostname": "node-b"}, 3)],
    ),
]


@pytest.mark.parametrize(("settings", "identity", "expected"), CASES, ids=lambda case: str(case)[:40])
def test_plugin_query_values(
    tmp_path: Path,
    settings: dict[str, Any],
    identity: NodeIdentity,
    expected: list[tuple[dict[str, str], float]],
) -> None:
    query = build_plugin(PluginSpec.model_validate(settings), identity).query
    assert_evaluates_to(tmp_path, INPUT_SERIES, query, expected)


# The same nodes read from the node mixin's rules (source RecordingRules): cpu counts iowait and steal as
# idle (these nodes have neither), diskIO keeps to the plugin's devices, network counts every device but lo
# in bytes/s (node A's 100 + 100 on eth0, node B's 200 + 0).
RULE_CASES: list[tuple[dict[str, Any], list[tuple[dict[str, str], float]]]] = [
    ({"name": "cpu", "timeRange": "2m"}, [(NODE_A, 25), (NODE_B, 50)]),
    ({"name": "cpu", "timeRange": "0s"}, [(NODE_A, 25), (NODE_B, 50)]),
    ({"name": "memory", "timeRange": "5m"}, [(NODE_A, 75), (NODE_B, 50)]),
    ({"name": "diskIO", "timeRange": "1m"}, [(NODE_A, 50), (NODE_B, 25)]),
    (
        {"name": "network", "timeRange": "1m"},
        [
            ({**NODE_A, "promsched_unit": "bytes_per_second"}, 200),
            ({**NODE_B, "promsched_unit": "bytes_per_second"}, 200),
        ],
    ),
]


@pytest.mark.parametrize(("settings", "expected"), RULE_CASES, ids=lambda case: str(case)[:40])
def test_plugin_query_values_from_the_node_mixin_rules(
    tmp_path: Path, settings: dict[str, Any], expected: list[tuple[dict[str, str], float]]
) -> None:
    spec = PluginSpec.model_validate({**settings, "source": "RecordingRules"})
    query = build_plugin(spec, UNAME).query
    assert_evaluates_to(tmp_path, INPUT_SERIES, query, expected, node_mixin_expressions("node"))


def test_uname_query_gives_each_instance_its_nodename_once(tmp_path: Path) -> None:
    # node A's node_uname_info is scraped by two jobs: still one series.
    expected = [
        ({"instance": "a:9100", "nodename": "node-a"}, 1),
        ({"instance": "b:9100", "nodename": "node-b"}, 1),
    ]
    assert_evaluates_to(tmp_path, INPUT_SERIES, UNAME_QUERY, expected)
    assert_evaluates_to(tmp_path, kps.input_series(), UNAME_QUERY, kps.uname_answer())


@pytest.mark.parametrize("identity", kps.IDENTITIES, ids=lambda i: i.source.value)
def test_network_counts_physical_devices_once_on_kube_prometheus_stack(
    tmp_path: Path, identity: NodeIdentity
) -> None:
    """Veths, CNI bridges and loopback are left out; a negative or absent speed is unknown; the two
    node_exporter pods of a rollout count once."""
    query = build_plugin(PluginSpec(name="network"), identity).query
    expected = kps.network_answer(identity, kps.NETWORK_PERCENT, kps.NETWORK_BYTES)
    assert_evaluates_to(tmp_path, kps.input_series(), query, expected)


@pytest.mark.parametrize("identity", kps.IDENTITIES, ids=lambda i: i.source.value)
def test_network_from_the_node_mixin_rules_on_kube_prometheus_stack(
    tmp_path: Path, identity: NodeIdentity
) -> None:
    """The mixin's rules count every device but lo; the two node_exporter pods of a rollout, each with
    its own recorded series, count once."""
    query = build_plugin(PluginSpec(name="network", source="RecordingRules", time_range="1m"), identity).query
    expected = kps.network_answer(identity, {}, kps.NETWORK_BYTES_ALL_BUT_LO)
    rules = node_mixin_expressions("node-exporter")
    assert_evaluates_to(tmp_path, kps.input_series(), query, expected, rules)


def test_network_device_exclusions_can_be_overridden(tmp_path: Path) -> None:
    spec = PluginSpec(name="network", device_exclude_pattern="lo")
    query = build_plugin(spec, kps.BY_NODE_LABEL).query
    expected = kps.network_answer(kps.BY_NODE_LABEL, {}, kps.NETWORK_BYTES_ALL_BUT_LO)
    assert_evaluates_to(tmp_path, kps.input_series(), query, expected)


def test_network_devices_by_name_on_kube_prometheus_stack(tmp_path: Path) -> None:
    query = build_plugin(PluginSpec(name="network", devices=["eth0"]), kps.BY_ADDRESS).query
    # worker-03's eth0 alone has a speed now; worker-02 has no eth0.
    expected = kps.network_answer(kps.BY_ADDRESS, {"worker-01": 20.0, "worker-03": 20.0}, {})
    assert_evaluates_to(tmp_path, kps.input_series(), query, expected)


def test_hostile_values_parse(tmp_path: Path) -> None:
    """Quoted hostile strings are valid PromQL literals for Prometheus's own parser."""
    values = ['a"b', "a\\b", "a\nb", '"} or vector(1)', "\x00", "é", "\u2028", "\U000e0001", ".*|("]
    rules = [
        {
            "record": f"hostile_{index}",
            "expr": promql.selector("m", promql.matches("device", promql.any_of([v]))),
        }
        for index, v in enumerate(values)
    ] + [
        {"record": f"hostile_eq_{index}", "expr": promql.selector("m", promql.equals("mountpoint", v))}
        for index, v in enumerate(values)
    ]
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "hostile", "rules": rules}]}))
    run = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr
