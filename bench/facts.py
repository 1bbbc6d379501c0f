"""What a bench's results were measured on: the machine, the commit (and what differed from it under
operator/), the sandbox's Kubernetes release and when."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.commanding import REPO
from promsched.sandbox.builds.components import SANDBOX_RELEASE


def revision(root: Path = REPO) -> dict[str, Any]:
    """The commit measured (of the checkout at `root`), and the files of the package that differed from it
    when the run started."""

    def git(*args: str) -> str:
        result = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return result.stdout.rstrip()

    changed = git("status", "--porcelain", "--", "operator")
    return {
        "commit": git("rev-parse", "HEAD").strip(),
        "changed": [line[3:] for line in changed.splitlines()],
    }


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpus": os.cpu_count(), "cpu_model": model, "python": platform.python_version()}


def measured_on() -> dict[str, Any]:
    """The facts every bench's results carry: Kubernetes release, machine, revision and start time."""
    return {
        "kubernetes": SANDBOX_RELEASE,
        "machine": machine(),
        "revision": revision(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
