"""The benches' sandboxes: a fresh directory with the nodes' load profiles, and stopping a sandbox while
keeping its schedulers' logs."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from promsched.sandbox import launching


def prepare(workdir: Path | None, name: str, nodes: int, profiles: dict[str, Any]) -> tuple[Path, Path]:
    """A fresh directory `promsched-NAME-NODES-*` under `workdir` (default: the temp dir) for a sandbox,
    and the file of the nodes' profiles written into it: (directory, profiles file)."""
    base = workdir or Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix=f"promsched-{name}-{nodes}-", dir=base))
    profiles_file = directory / f"{name}-profiles.yaml"
    profiles_file.write_text(yaml.safe_dump({"nodes": profiles}, sort_keys=False))
    return directory, profiles_file


def stop_sandbox(directory: Path, logs: Path) -> None:
    """Stop the sandbox in `directory` and remove it, keeping the schedulers' logs (bench-*.log) in `logs`."""
    launching.down(directory, lambda _line: None)
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    for log in (directory / "logs").glob("bench-*.log"):
        shutil.copy(log, logs / log.name)
    shutil.rmtree(directory, ignore_errors=True)
