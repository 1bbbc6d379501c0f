"""The benches' sandboxes (bench/sandboxing.py): what is kept of the sandbox's logs when it stops, and its
processes yielding the CPU to the schedulers under test."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from bench.sandboxing import COMPONENT_LOG_BYTES, stop_sandbox, yield_cpu

from promsched.sandbox.control_plane.supervising import Supervisor, wait_until


def test_stopping_keeps_the_schedulers_logs_whole_and_the_components_last_lines(tmp_path: Path) -> None:
    directory = tmp_path / "sandbox"
    (directory / "logs").mkdir(parents=True)
    scheduler = b"scheduled\n" * (COMPONENT_LOG_BYTES // 5)
    (directory / "logs" / "bench-promsched.log").write_bytes(scheduler)
    (directory / "logs" / "kwok.log").write_bytes(b"old\n" * COMPONENT_LOG_BYTES + b"the last line\n")
    (directory / "logs" / "etcd.log").write_bytes(b"short\n")
    kept = tmp_path / "logs-5000"

    stop_sandbox(directory, kept)

    assert not directory.exists()
    assert (kept / "bench-promsched.log").read_bytes() == scheduler
    kwok = (kept / "kwok.log").read_bytes()
    assert len(kwok) == COMPONENT_LOG_BYTES
    assert kwok.endswith(b"old\nthe last line\n")
    assert (kept / "etcd.log").read_bytes() == b"short\n"


def test_yielding_the_cpu_renices_every_thread_in_the_sandboxs_sessions_alone(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path)
    # A leader and a child it starts: both in the leader's session.
    supervisor.spawn("component", ["sh", "-c", "sleep 60 & sleep 60; wait"])
    leader = supervisor.get("component")
    assert leader is not None
    try:
        wait_until("the component's child", lambda: len(_session(leader.pid)) == 3, 10, interval=0.02)
        ours = os.getpriority(os.PRIO_PROCESS, 0)

        assert yield_cpu(tmp_path, ours + 5) == ["component"]

        threads = [thread for pid in _session(leader.pid) for thread in (Path(f"/proc/{pid}/task")).iterdir()]
        assert {os.getpriority(os.PRIO_PROCESS, int(thread.name)) for thread in threads} == {ours + 5}
        assert os.getpriority(os.PRIO_PROCESS, 0) == ours
    finally:
        supervisor.stop_all(lambda _line: None)


def _session(leader: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.getsid(int(entry.name)) == leader:
                    pids.append(int(entry.name))
    return pids
