"""The benches' sandbox stop (bench/sandboxing.py): what is kept of the sandbox's logs."""

from __future__ import annotations

from pathlib import Path

from bench.sandboxing import COMPONENT_LOG_BYTES, stop_sandbox


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
