"""The Dockerfile's structure (no Docker engine here to build it): multi-stage on a slim Python base, only
the runtime environment in the final image, a numeric non-root user, `promsched run` as entrypoint."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).parents[3]
DOCKERFILE = REPO / "Dockerfile"
VALUES = yaml.safe_load((REPO / "charts" / "promsched" / "values.yaml").read_text())
DEPLOYMENT = (REPO / "charts" / "promsched" / "templates" / "deployment.yaml").read_text()


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def _base_image() -> str:
    declared = dict(arg.split("=", 1) for name, arg in _instructions() if name == "ARG" and "=" in arg)
    return declared["PYTHON_IMAGE"]


def test_it_builds_in_one_stage_and_runs_from_another() -> None:
    build, final = _stages()
    assert re.fullmatch(r"\$\{PYTHON_IMAGE\} AS build", build[0][1], re.IGNORECASE)
    assert final[0][1] == "${PYTHON_IMAGE}"
    # The final stage takes only the built environment; no sources, no pip run.
    copies = [args for name, args in final if name == "COPY"]
    assert copies == ["--from=build /opt/promsched /opt/promsched"]
    assert not [args for name, args in final if name == "RUN"]


def test_the_base_is_a_slim_python_of_the_supported_version() -> None:
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = requires.removeprefix(">=")

    assert re.fullmatch(rf"python:{re.escape(minimum)}-slim(-\w+)?", _base_image())


def test_only_the_runtime_dependencies_are_installed() -> None:
    build, _final = _stages()
    installs = [args for name, args in build if name == "RUN" and " install " in args]

    assert installs == ["pip --python /opt/promsched/bin/python install ."], installs


def test_it_runs_as_a_numeric_non_root_user_matching_the_chart() -> None:
    _build, final = _stages()
    users = [args for name, args in final if name == "USER"]
    assert len(users) == 1
    uid, _, gid = users[0].partition(":")

    assert re.fullmatch(r"[1-9][0-9]*", uid), "a numeric UID other than root's 0"
    assert re.fullmatch(r"[1-9][0-9]*", gid), "a numeric GID other than root's 0"
    assert f"runAsUser: {uid}" in DEPLOYMENT
    assert f"runAsGroup: {gid}" in DEPLOYMENT


def test_the_entrypoint_is_promsched_run_listening_on_the_charts_port() -> None:
    _build, final = _stages()
    entrypoints = [json.loads(args) for name, args in final if name == "ENTRYPOINT"]
    exposed = [args for name, args in final if name == "EXPOSE"]

    assert entrypoints == [["promsched", "run"]]
    assert exposed == [str(VALUES["port"])]
    assert f"PROMSCHED_LISTEN=0.0.0.0:{VALUES['port']}" in DOCKERFILE.read_text()


def test_the_build_context_holds_only_what_the_image_needs() -> None:
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    rules = [line for line in lines if line and not line.startswith("#")]
    assert rules[0] == "*"
    assert {rule for rule in rules if rule.startswith("!")} == {"!pyproject.toml", "!README.md", "!operator/"}
    sources = [args.split()[:-1] for name, args in _instructions() if name == "COPY" and "--from" not in args]
    assert {source for group in sources for source in group} == {"pyproject.toml", "README.md", "operator"}
