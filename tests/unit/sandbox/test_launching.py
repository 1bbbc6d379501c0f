import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from promsched.sandbox.control_plane.clusters import SandboxError
from promsched.sandbox.control_plane.supervising import (
    EPHEMERAL_RANGE,
    LOWEST_PORT,
    Supervisor,
    _start_time,
    bindable,
    free_port,
    wait_until,
)
from promsched.sandbox.launching import node_manifest, ready_count
from promsched.sandbox.node_metrics.profiles import LoadProfile, NodeSetup


def test_supervisor_stops_what_it_started_and_forgets_it(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path)
    process = supervisor.spawn("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    assert process.alive()
    assert supervisor.get("sleeper") == process
    assert supervisor.stop_all(lambda _line: None) == ["sleeper"]
    assert not process.alive()
    assert supervisor.recorded() == []


def test_a_process_restarts_with_the_command_it_was_started_with(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path)
    first = supervisor.spawn("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    second = supervisor.restart("sleeper")
    try:
        assert not first.alive()
        assert second.alive()
        assert second.pid != first.pid
    finally:
        supervisor.stop_all(lambda _line: None)
    with pytest.raises(SandboxError, match="never started"):
        supervisor.restart("sleeper")


def test_a_recycled_pid_is_not_mistaken_for_ours(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path)
    process = supervisor.spawn("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    pid_file = tmp_path / "pids" / "sleeper.pid"
    pid_file.write_text(f"{process.pid} 1\n")
    recorded = supervisor.get("sleeper")
    assert recorded is not None
    assert not recorded.alive()
    pid_file.write_text(f"{process.pid} {process.started}\n")
    supervisor.stop_all(lambda _line: None)


def test_waiting_on_a_dead_process_fails_early_with_its_log(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path)
    process = supervisor.spawn(
        "crasher", [sys.executable, "-c", "print('bad flag --x'); raise SystemExit(3)"]
    )
    with pytest.raises(SandboxError, match="bad flag --x"):
        wait_until("the impossible", lambda: False, timeout=30, process=process, supervisor=supervisor)


def test_nodes_are_kwok_managed_with_real_looking_status() -> None:
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    manifest = node_manifest("node-4", 4, NodeSetup(LoadProfile(), {"gpu": "true"}, [taint]))
    assert manifest["metadata"] == {
        "name": "node-4",
        "labels": {
            "kubernetes.io/hostname": "node-4",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": "zone-b",
            "node.kubernetes.io/instance-type": "sandbox-4c16g",
            "type": "kwok",
            "gpu": "true",
        },
        "annotations": {"kwok.x-k8s.io/node": "fake"},
    }
    assert manifest["spec"] == {"taints": [taint]}
    status = manifest["status"]
    assert isinstance(status, dict)
    assert {"type": "InternalIP", "address": "10.1.0.5"} in status["addresses"]
    assert status["allocatable"]["pods"] == "110"


def test_ready_nodes_are_ready_without_node_lifecycle_taints() -> None:
    listing = (
        "True\t\n"  # ready, untainted
        "True\tdedicated\n"  # a profile's own taint does not count against it
        "Unknown\tnode.kubernetes.io/unreachable\n"
        "True\tdedicated node.kubernetes.io/not-ready\n"  # Ready again, not yet untainted
        "False\t\n"
        "\t\n"  # not initialised by kwok yet: no Ready condition
    )
    assert ready_count(listing) == 2
    assert ready_count("") == 0


def test_server_ports_come_from_below_the_ephemeral_range(tmp_path: Path) -> None:
    # Outgoing connections take their source ports from 32768 up: none of them can hold these.
    ephemeral = tmp_path / "ip_local_port_range"
    ephemeral.write_text("32768\t60999\n")
    ports = {free_port(ephemeral, tmp_path / "ports.json") for _ in range(20)}
    assert all(LOWEST_PORT <= port < 32768 for port in ports)
    assert len(ports) > 1  # drawn at random, so two sandboxes started at once rarely pick alike
    assert all(bindable(port) for port in ports)


@pytest.mark.parametrize("ephemeral_range", ["1024 65535\n", None])
def test_without_room_below_the_range_the_kernel_picks_the_port(
    tmp_path: Path, ephemeral_range: str | None
) -> None:
    ephemeral = tmp_path / "ip_local_port_range"  # None: unreadable
    if ephemeral_range is not None:
        ephemeral.write_text(ephemeral_range)
    port = free_port(ephemeral, tmp_path / "ports.json")
    assert port >= int(EPHEMERAL_RANGE.read_text().split()[0])  # bind(0)'s, from the kernel's own range
    assert bindable(port)


def test_a_port_handed_to_a_live_process_is_not_handed_out_again(tmp_path: Path) -> None:
    # Two sandboxes pick their ports before either binds one: the registry keeps them apart.
    candidates = range(LOWEST_PORT, LOWEST_PORT + 4)
    if not all(bindable(port) for port in candidates):
        pytest.skip("a port the test draws from is in use on this machine")
    ephemeral, registry = tmp_path / "ip_local_port_range", tmp_path / "ports.json"
    ephemeral.write_text(f"{candidates.stop} 60999")
    parent = os.getppid()
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead = int(exited.stdout)
    held = {str(LOWEST_PORT + i): [parent, _start_time(parent)] for i in range(2)}
    held[str(LOWEST_PORT + 2)] = [dead, "1"]  # its process has exited: free to hand out again
    registry.write_text(json.dumps(held))

    ports = {free_port(ephemeral, registry), free_port(ephemeral, registry)}

    assert ports == {LOWEST_PORT + 2, LOWEST_PORT + 3}
    recorded = json.loads(registry.read_text())
    assert {port for port, (pid, _started) in recorded.items() if pid == os.getpid()} == {
        str(port) for port in ports
    }
