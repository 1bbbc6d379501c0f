"""Processes of the sandbox: spawned in sessions of their own, recorded in pid files, stopped for good.

Every process runs in a session of its own, so it outlives the launcher, and leaves a pid file
(`DIR/pids/NAME.pid`: pid and kernel start time) the moment it is spawned. `down` trusts only pid files
whose start time still matches, so it never signals a recycled pid, and it works after a crash of the
launcher, of a test run or of the machine's shell.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from promsched.sandbox.control_plane.clusters import SandboxError

Report = Callable[[str], None]


# Sandboxes started at once (make test's bench smokes) each pick all their ports before their servers
# bind any, seconds to minutes later: a port free when picked was then taken by another sandbox's
# server (kwok exited with "bind: address already in use", twice in make test). So every port handed out
# is recorded, with its process, in a registry all processes read under one lock, and not handed out
# again while that process lives. Ports are drawn from below the kernel's ephemeral range, where no
# outgoing connection's source port can take one either.
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_REGISTRY = Path(tempfile.gettempdir()) / "promsched-ports.json"
LOWEST_PORT = 10000
_TRIES = 100


def free_port(ephemeral_range: Path = EPHEMERAL_RANGE, registry: Path = PORT_REGISTRY) -> int:
    """A port on 127.0.0.1 that nothing is bound to now and that no other live process was handed by
    this function, from below the ephemeral range where it can (from it, bind(0)'s, where that range
    starts too low to leave any)."""
    try:
        with open(registry.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
            held = _held_ports(registry)
            port = _unbound_port(ephemeral_range, set(held))
            me = os.getpid()
            held[port] = (me, _start_time(me) or "")
            registry.write_text(json.dumps({str(p): list(owner) for p, owner in held.items()}))
            return port
    except OSError:  # no registry to be had: a port free now is the best to give
        return _unbound_port(ephemeral_range, set())


def _held_ports(registry: Path) -> dict[int, tuple[int, str]]:
    """The registry's ports whose process still runs (the same pid and start time)."""
    try:
        recorded = json.loads(registry.read_text())
        entries = [(int(port), int(pid), str(started)) for port, (pid, started) in recorded.items()]
    except (OSError, ValueError, TypeError, AttributeError):  # none yet, or not one of ours
        return {}
    return {port: (pid, started) for port, pid, started in entries if _start_time(pid) == started}


def _unbound_port(ephemeral_range: Path, taken: set[int]) -> int:
    try:
        ephemeral_start = int(ephemeral_range.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_start = LOWEST_PORT
    for _ in range(_TRIES if ephemeral_start > LOWEST_PORT else 0):
        port = random.randrange(LOWEST_PORT, ephemeral_start)
        if port not in taken and bindable(port):
            return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            bound: int = sock.getsockname()[1]
        if bound not in taken:
            return bound


def bindable(port: int) -> bool:
    """Whether a server could bind `port` on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _start_time(pid: int) -> str | None:
    """The kernel's start time of a process (field 22 of /proc/PID/stat), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    # A zombie has exited; only its parent's wait is missing.
    return None if fields[0] == "Z" else fields[19]


@dataclass(frozen=True)
class Process:
    name: str
    pid: int
    started: str

    def alive(self) -> bool:
        return _start_time(self.pid) == self.started


class Supervisor:
    """Spawns and stops the sandbox's processes through pid files in `DIR/pids`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.pids = directory / "pids"
        self.logs = directory / "logs"

    def spawn(self, name: str, command: Sequence[str], env: dict[str, str] | None = None) -> Process:
        self.pids.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("ab") as log:
            popen = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=self.directory,
            )
        started = _start_time(popen.pid) or ""
        (self.pids / f"{name}.pid").write_text(f"{popen.pid} {started}\n")
        # Kept so the same process can be started again (fault tests restart components).
        (self.pids / f"{name}.cmd").write_text(json.dumps({"command": list(command), "env": env}))
        return Process(name, popen.pid, started)

    def restart(self, name: str) -> Process:
        """Stop `name` if it runs and start it again with the command it was started with."""
        recipe_file = self.pids / f"{name}.cmd"
        if not recipe_file.exists():
            raise SandboxError(f"{name} was never started in {self.directory}")
        recipe = json.loads(recipe_file.read_text())
        self.stop(name)
        return self.spawn(name, recipe["command"], recipe["env"])

    def recorded(self) -> list[Process]:
        processes = []
        for path in sorted(self.pids.glob("*.pid")) if self.pids.exists() else []:
            pid, _, started = path.read_text().strip().partition(" ")
            processes.append(Process(path.stem, int(pid), started))
        return processes

    def get(self, name: str) -> Process | None:
        return next((p for p in self.recorded() if p.name == name), None)

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, name: str, grace: float = 10.0) -> bool:
        """Stop one recorded process; True when it was running."""
        process = self.get(name)
        (self.pids / f"{name}.pid").unlink(missing_ok=True)
        if process is None or not process.alive():
            return False
        _terminate(process, grace, lambda _line: None)
        return True

    def stop_all(self, report: Report, grace: float = 10.0) -> list[str]:
        """Stop every recorded live process group, last started first (clients before the servers they
        need, so none hangs on a dead dependency); SIGKILL what ignores SIGTERM for `grace` seconds."""
        alive = [p for p in self.recorded() if p.alive()]
        alive.sort(key=lambda p: int(p.started or 0), reverse=True)
        for process in alive:
            _terminate(process, grace, report)
        for path in [*self.pids.glob("*.pid"), *self.pids.glob("*.cmd")] if self.pids.exists() else []:
            path.unlink()
        return [p.name for p in alive]


def _terminate(process: Process, grace: float, report: Report) -> None:
    _signal_group(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and process.alive():
        time.sleep(0.05)
    if process.alive():
        report(f"  {process.name} did not stop on SIGTERM within {grace:.0f}s; killing it")
        _signal_group(process.pid, signal.SIGKILL)
    _reap(process.pid)


def _signal_group(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signum)


def _reap(pid: int) -> None:
    """Collect our own children so they do not linger as zombies; other processes are not ours to wait on."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def wait_until(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    process: Process | None = None,
    supervisor: Supervisor | None = None,
    interval: float = 0.25,
) -> None:
    """Poll `check` until it holds; fail early with the log if `process` died, else at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except (OSError, urllib.error.URLError, SandboxError, ValueError):
            pass
        if process is not None and supervisor is not None and not process.alive():
            raise SandboxError(
                f"{process.name} exited while waiting for {what}:\n{supervisor.log_tail(process.name)}"
            )
        if time.monotonic() > deadline:
            tail = f":\n{supervisor.log_tail(process.name)}" if process and supervisor else ""
            raise SandboxError(f"timed out after {timeout:.0f}s waiting for {what}{tail}")
        time.sleep(interval)


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    with urllib.request.urlopen(url, timeout=5, context=context) as response:
        return bool(response.status == 200)
