"""The Dockerfile's build, replayed without a Docker engine (there is none here): the same venv-without-pip
install of the package and its runtime dependencies only, then the entrypoint as the image's UID."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]
IMAGE_USER = "65532"


@pytest.fixture
def image_root() -> Iterator[Path]:
    """A folder the image's unprivileged user can read, as /opt is in the image (pytest's are 0700)."""
    with tempfile.TemporaryDirectory(prefix="promsched-image-") as folder:
        root = Path(folder)
        root.chmod(0o755)
        yield root


def test_the_images_build_steps_give_a_working_entrypoint(image_root: Path) -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "RUN python -m venv --without-pip /opt/promsched" in dockerfile
    assert "RUN pip --python /opt/promsched/bin/python install ." in dockerfile
    assert f"USER {IMAGE_USER}:{IMAGE_USER}" in dockerfile
    environment = image_root / "opt-promsched"
    source = image_root / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):  # what the Dockerfile COPYs, and nothing else
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "operator", source / "operator", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(environment)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(environment / "bin" / "python"), "install", "-q", "."]
    subprocess.run(pip, cwd=source, check=True, timeout=600)
    installed = subprocess.run(
        [str(environment / "bin" / "python"), "-m", "pip", "--version"], capture_output=True, check=False
    )
    assert installed.returncode != 0, "pip must not ship in the image's environment"
    command = [str(environment / "bin" / "promsched"), "run", "--help"]
    if os.geteuid() == 0 and shutil.which("setpriv"):
        command = ["setpriv", f"--reuid={IMAGE_USER}", f"--regid={IMAGE_USER}", "--clear-groups", *command]
    env = {"PATH": f"{environment / 'bin'}:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--leader-elect" in result.stdout
    # The operator's modules import with the runtime dependencies alone (no test extra).
    probe = [str(environment / "bin" / "python"), "-c", "import promsched.operating.wiring, promsched.cli"]
    assert subprocess.run(probe, capture_output=True, env=env, check=False).returncode == 0
