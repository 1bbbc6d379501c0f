"""The Dockerfile's build, replayed without a Docker engine (there is none here): its build stage's RUN
steps, as written, on a copy of the build context that .dockerignore lets through, with the image's
paths moved under a temporary root; then the environment the final stage copies is compared with the
lock, and its entrypoint runs as the image's UID."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from support.dockerfiles import REPO, context_files, lock_pins, normalized, stages

pytestmark = pytest.mark.integration
IMAGE_USER = "65532"


@pytest.fixture
def image_root() -> Iterator[Path]:
    """A folder the image's unprivileged user can read, as /opt is in the image (pytest's are 0700)."""
    with tempfile.TemporaryDirectory(prefix="promsched-image-") as folder:
        root = Path(folder)
        root.chmod(0o755)
        yield root


def _replay_build_stage(root: Path) -> None:
    """Runs the build stage's RUN steps in its WORKDIR, its COPYs taken from the build context. The base
    image's `python` and `pip` are this interpreter's; absolute paths (/opt/..., /wheels) move under root."""
    build, _final = stages()
    shims = root / "base-image-bin"
    shims.mkdir()
    for command, invocation in (("python", sys.executable), ("pip", f"{sys.executable} -m pip")):
        (shims / command).write_text(f'#!/bin/sh\nexec {invocation} "$@"\n')
        (shims / command).chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}:/usr/bin:/bin"}
    workdir = root
    sent = context_files()
    for instruction, args in build:
        arguments = re.sub(r"(?<=[\s=])/", f"{root}/", f" {args}").strip()
        if instruction == "ENV":
            env.update(re.findall(r"(\w+)=(\S+)", args))
        elif instruction == "WORKDIR":
            workdir = Path(arguments)
            workdir.mkdir(parents=True, exist_ok=True)
        elif instruction == "COPY":
            # Docker's rules: a file goes into a target ending in / (or named by it), a folder's
            # contents into the target; a source the context lacks fails the build.
            *sources, target = arguments.split()
            for source in sources:
                copied = [path for path in sent if path == source or path.startswith(f"{source}/")]
                assert copied, f"COPY {source}: not in the build context"
                for path in copied:
                    if path == source:
                        destination = (
                            workdir / target / Path(path).name if target.endswith("/") else workdir / target
                        )
                    else:
                        destination = workdir / target / Path(path).relative_to(source)
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(REPO / path, destination)
        elif instruction == "RUN":
            subprocess.run(["sh", "-c", arguments], cwd=workdir, env=env, check=True, timeout=600)


def _requirement_closure(environment: Path, name: str) -> set[str]:
    """The distributions that name needs, transitively, as installed in environment (markers evaluated
    for this interpreter, the image's Python version; extras followed)."""
    site = next((environment / "lib").glob("python3.*/site-packages"))
    installed = {
        normalized(d.metadata["Name"]): d for d in importlib.metadata.distributions(path=[str(site)])
    }
    needed: set[str] = set()
    pending = [(normalized(name), frozenset[str]())]
    while pending:
        current, extras = pending.pop()
        for spec in installed[current].requires or []:
            requirement = Requirement(spec)
            marker_environments = [{**default_environment(), "extra": extra} for extra in extras | {""}]
            if requirement.marker and not any(requirement.marker.evaluate(e) for e in marker_environments):
                continue
            dependency = normalized(requirement.name)
            if dependency not in needed or requirement.extras:
                needed.add(dependency)
                pending.append((dependency, frozenset(requirement.extras)))
    return needed


def test_the_images_build_steps_give_the_locked_environment_and_a_working_entrypoint(
    image_root: Path,
) -> None:
    _replay_build_stage(image_root)
    environment = image_root / "opt" / "promsched"  # what the final stage copies
    python = str(environment / "bin" / "python")

    # The image's environment is the lock plus promsched: no more, no less, at the locked versions.
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = {
        normalized(name): version for name, version in re.findall(r"^(\S+)==(\S+)$", listed, re.MULTILINE)
    }
    locked = {name: pin.version for name, pin in lock_pins(REPO / "requirements" / "runtime.txt").items()}
    assert installed.pop("promsched") is not None
    assert installed == locked
    # Every locked package is one promsched needs: the lock carries nothing stale.
    assert _requirement_closure(environment, "promsched") == set(locked)
    assert "cryptography" not in installed

    # The sandbox's Go modules never reached the wheel.
    (wheel,) = (image_root / "wheels").glob("promsched-*.whl")
    files = subprocess.run(
        [sys.executable, "-m", "zipfile", "-l", str(wheel)], capture_output=True, text=True, check=True
    ).stdout
    assert "promsched/sandbox/builds/components.py" in files
    assert "gomod" not in files

    no_pip = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False)
    assert no_pip.returncode != 0, "pip must not ship in the image's environment"
    command = [str(environment / "bin" / "promsched"), "run", "--help"]
    if os.geteuid() == 0 and shutil.which("setpriv"):
        command = ["setpriv", f"--reuid={IMAGE_USER}", f"--regid={IMAGE_USER}", "--clear-groups", *command]
    env = {"PATH": f"{environment / 'bin'}:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--leader-elect" in result.stdout
    # The operator's modules import with the runtime dependencies alone (no test extra).
    probe = [python, "-c", "import promsched.operating.wiring, promsched.cli"]
    assert subprocess.run(probe, capture_output=True, env=env, check=False).returncode == 0
    dockerfile = (REPO / "Dockerfile").read_text()
    assert f"USER {IMAGE_USER}:{IMAGE_USER}" in dockerfile
