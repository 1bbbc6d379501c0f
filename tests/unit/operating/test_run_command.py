"""`promsched run`: its start fails fast (a start that cannot succeed exits 1 with the reason, instead
of Kopf retrying its startup handler every minute while nothing is scheduled), and its API rate limit
flags are kube-scheduler's."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from promsched.cli import main, parse
from promsched.metrics import offloading
from promsched.operating import listening, wiring
from support.kubeconfigs import kubeconfig, write_kubeconfig


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.fixture
def unreachable_cluster(tmp_path: Path) -> Path:
    """A kubeconfig whose API server nobody answers for: a start that reached Kopf's watches would hang."""
    return write_kubeconfig(
        tmp_path / "config",
        kubeconfig(
            clusters={"api": {"server": "https://127.0.0.1:1"}},
            users={"me": {"token": "t"}},
            contexts={"main": {"cluster": "api", "user": "me"}},
            current="main",
        ),
    )


def test_a_busy_listen_address_is_named_with_the_fix(busy_port: int) -> None:
    with pytest.raises(listening.StartupError) as raised:
        listening.bind(f"127.0.0.1:{busy_port}")
    assert str(raised.value) == (
        f"--listen 127.0.0.1:{busy_port}: address already in use; choose another address with --listen"
    )


@pytest.mark.parametrize(
    ("address", "host", "port"),
    [("127.0.0.1:8080", "127.0.0.1", 8080), ("[::]:8080", "::", 8080), (":9100", "0.0.0.0", 9100)],
)
def test_listen_addresses_are_host_and_port(address: str, host: str, port: int) -> None:
    assert listening.parse(address) == (host, port)


@pytest.mark.parametrize("address", ["8080", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000"])
def test_a_listen_address_without_a_port_says_what_to_give(address: str) -> None:
    with pytest.raises(listening.StartupError) as raised:
        listening.parse(address)
    assert str(raised.value) == (
        f"--listen {address}: not HOST:PORT; give one, e.g. 127.0.0.1:8080, 0.0.0.0:8080 or [::]:8080"
    )


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 in this Python")
def test_every_ipv6_address_takes_ipv4_connections_too() -> None:
    try:
        listener = listening.bind("[::]:0")
    except listening.StartupError as error:
        pytest.skip(f"no IPv6 on this machine: {error}")
    with listener, socket.create_connection(("127.0.0.1", listener.getsockname()[1]), timeout=5):
        pass


def test_run_with_a_busy_listen_port_exits_1_with_the_reason(
    busy_port: int, unreachable_cluster: Path
) -> None:
    command = [sys.executable, "-m", "promsched.cli", "run", "--listen", f"127.0.0.1:{busy_port}"]
    finished = subprocess.run(
        [*command, "--kubeconfig", str(unreachable_cluster)],
        capture_output=True,
        text=True,
        timeout=60,  # a start that went on to Kopf would not return at all
        check=False,
    )
    assert finished.returncode == 1, finished.stderr
    assert finished.stderr.splitlines()[-1] == (
        f"promsched: --listen 127.0.0.1:{busy_port}: address already in use; "
        "choose another address with --listen"
    )


@pytest.mark.timeout(60)  # Kopf retrying the handler would never return
# Kopf stops its tasks before its credentials task (which would log in) ever ran.
@pytest.mark.filterwarnings("ignore:coroutine 'authenticator' was never awaited:RuntimeWarning")
def test_a_failing_startup_handler_stops_kopf_and_run_raises_why(
    unreachable_cluster: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def fail(*_args: object) -> None:
        raise RuntimeError("the scheduler could not start")

    monkeypatch.setattr(wiring, "_start", fail)
    options = wiring.RunOptions(kubeconfig=unreachable_cluster, listen="127.0.0.1:0")
    with pytest.raises(listening.StartupError) as raised:
        wiring.run(options)
    assert str(raised.value) == "startup failed: the scheduler could not start"


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore:coroutine 'authenticator' was never awaited:RuntimeWarning")
def test_the_operator_runs_on_the_loop_the_metrics_worker_paces_its_work_by(
    unreachable_cluster: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signalled: list[bool] = []

    async def start(*_args: object) -> None:
        signalled.append(offloading._Operators.waits is not None)
        raise RuntimeError("started")

    monkeypatch.setattr(offloading._Operators, "waits", None)
    monkeypatch.setattr(wiring, "_start", start)
    with pytest.raises(listening.StartupError):
        wiring.run(wiring.RunOptions(kubeconfig=unreachable_cluster, listen="127.0.0.1:0"))
    assert signalled == [True]
    assert offloading._Operators.waits is None  # closed with its loop


def test_the_api_rate_limit_defaults_to_kube_schedulers() -> None:
    args = parse(["run"])
    assert (args["kube_api_qps"], args["kube_api_burst"]) == (50.0, 100)
    options = wiring.RunOptions()
    assert (options.kube_api_qps, options.kube_api_burst) == (50.0, 100)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--kube-api-qps", "0", "must be a number above 0, not '0' (kube-scheduler's default: 50)"),
        (
            "--kube-api-burst",
            "1.5",
            "must be a whole number above 0, not '1.5' (kube-scheduler's default: 100)",
        ),
    ],
)
def test_a_rate_limit_that_could_never_send_is_refused(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", flag, value]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"promsched run: error: argument {flag}: {message}"
