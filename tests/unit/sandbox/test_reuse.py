"""A second `make demo`: `sandbox up --reuse` takes the sandbox already up, and the demo its scheduler.

The sandbox's components are stand-in processes under the component names; nothing is built or started.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promsched.sandbox import demoing, launching
from promsched.sandbox.builds import installing
from promsched.sandbox.control_plane.clusters import Sandbox, SandboxError, SandboxState
from promsched.sandbox.control_plane.supervising import Supervisor

SLEEPER = ["sleep", "300"]


@pytest.fixture
def supervisor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Supervisor]:
    def no_install(*_args: Any, **_kwargs: Any) -> Path:
        raise AssertionError("a reused sandbox installs nothing")

    monkeypatch.setattr(installing, "install", no_install)
    supervisor = Supervisor(tmp_path.resolve())
    yield supervisor
    supervisor.stop_all(lambda _line: None, grace=2)


def saved_sandbox(directory: Path, nodes: int = 3) -> Sandbox:
    names = [f"node-{i}" for i in range(nodes)]
    state = SandboxState(str(directory), str(directory / "bin"), "release", names, {"prometheus": 9090})
    sandbox = Sandbox(directory, state)
    sandbox.save()
    return sandbox


def start(supervisor: Supervisor, *names: str) -> None:
    for name in names:
        supervisor.spawn(name, SLEEPER)


def test_a_sandbox_with_every_component_running_is_reused_as_it_is(supervisor: Supervisor) -> None:
    saved = saved_sandbox(supervisor.directory)
    start(supervisor, *launching.COMPONENTS)
    lines: list[str] = []
    reused = launching.up(supervisor.directory, nodes=6, reuse=True, report=lines.append)
    assert reused == saved
    assert lines == [f"reusing the sandbox already up in {supervisor.directory} (3 node(s))"]


def test_without_reuse_a_running_sandbox_is_refused(supervisor: Supervisor) -> None:
    saved_sandbox(supervisor.directory)
    start(supervisor, *launching.COMPONENTS)
    with pytest.raises(SandboxError, match="a sandbox is already up"):
        launching.up(supervisor.directory)


def test_a_sandbox_with_a_dead_component_is_not_reused_and_the_error_says_how_to_stop_it(
    supervisor: Supervisor,
) -> None:
    saved_sandbox(supervisor.directory)
    start(supervisor, *(name for name in launching.COMPONENTS if name != "prometheus"))
    with pytest.raises(SandboxError, match=r"cannot be reused \(prometheus not running\)") as error:
        launching.up(supervisor.directory, reuse=True)
    assert f"promsched sandbox down --dir {supervisor.directory}" in str(error.value)


def test_a_sandbox_still_starting_is_not_reused(supervisor: Supervisor) -> None:
    start(supervisor, *launching.COMPONENTS)  # every process started, sandbox.json not yet written
    with pytest.raises(SandboxError, match=r"cannot be reused \(it is still starting\)"):
        launching.up(supervisor.directory, reuse=True)


@pytest.fixture
def demo_steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The demo's cluster steps, recorded instead of run."""
    steps: list[str] = []
    monkeypatch.setattr(demoing, "install_crd", lambda _sandbox: steps.append("crd"))
    monkeypatch.setattr(demoing, "_apply", lambda _sandbox, doc: steps.append(f"apply {doc['kind']}"))
    monkeypatch.setattr(demoing, "start_scheduler", lambda _sandbox, _report: steps.append("start") or "")
    monkeypatch.setattr(demoing, "wait_for_metrics", lambda _sandbox, _name: None)
    monkeypatch.setattr(demoing, "wait_for_placements", lambda _sandbox: {"node-1": ["promsched-demo-a"]})
    monkeypatch.setattr(demoing, "placement_table", lambda _sandbox, _policy, _pods: "table")
    return steps


def test_the_demo_starts_its_scheduler_on_a_sandbox_without_one(
    supervisor: Supervisor, demo_steps: list[str]
) -> None:
    saved_sandbox(supervisor.directory)
    demoing.demo(supervisor.directory, lambda _line: None)
    assert demo_steps == ["crd", "apply SchedulingPolicy", "start", "apply Deployment"]


def test_a_second_demo_uses_the_scheduler_the_first_started(
    supervisor: Supervisor, demo_steps: list[str]
) -> None:
    saved_sandbox(supervisor.directory)
    scheduler = supervisor.spawn("promsched", SLEEPER)
    lines: list[str] = []
    demoing.demo(supervisor.directory, lines.append)
    assert demo_steps == ["crd", "apply SchedulingPolicy", "apply Deployment"]
    assert (
        f"promsched run is already running in this sandbox (pid {scheduler.pid}); the demo uses it" in lines
    )
