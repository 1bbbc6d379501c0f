"""The Dockerfile's structure (no Docker engine here to build it): multi-stage on a slim Python base pinned
by digest, only the locked runtime environment in the final image, a numeric non-root user, `promsched
run` as entrypoint, OCI labels; and the locks it installs, kept equal to pyproject.toml."""

from __future__ import annotations

import json
import re
import tomllib

import yaml
from packaging.requirements import Requirement

from support.dockerfiles import REPO, context_files, instructions, lock_pins, normalized, stages

DOCKERFILE = REPO / "Dockerfile"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
VALUES = yaml.safe_load((REPO / "charts" / "promsched" / "values.yaml").read_text())
RUNTIME_LOCK = REPO / "requirements" / "runtime.txt"
BUILD_LOCK = REPO / "requirements" / "build.txt"
FROM_PYPROJECT = "promsched (pyproject.toml)"  # how the lock notes pyproject's own dependencies


def _base_image() -> str:
    declared = dict(arg.split("=", 1) for name, arg in instructions() if name == "ARG" and "=" in arg)
    return declared["PYTHON_IMAGE"]


def _final_stage_args() -> dict[str, str]:
    _build, final = stages()
    return dict(arg.partition("=")[::2] for name, arg in final if name == "ARG")


def test_it_builds_in_one_stage_and_runs_from_another() -> None:
    build, final = stages()
    assert re.fullmatch(r"\$\{PYTHON_IMAGE\} AS build", build[0][1], re.IGNORECASE)
    assert final[0][1] == "${PYTHON_IMAGE}"
    # The final stage takes only the built environment; no sources, no pip run.
    copies = [args for name, args in final if name == "COPY"]
    assert copies == ["--from=build /opt/promsched /opt/promsched"]
    assert not [args for name, args in final if name == "RUN"]


def test_the_base_is_a_slim_python_of_the_supported_version_pinned_by_digest() -> None:
    minimum = PYPROJECT["project"]["requires-python"].removeprefix(">=")

    # The tag says which Python; the digest (of the multi-architecture index) fixes the bytes. Both
    # stages use the ARG, so `--build-arg PYTHON_IMAGE=...` moves them together.
    assert re.fullmatch(
        rf"python:{re.escape(minimum)}(\.\d+)?-slim(-\w+)?@sha256:[0-9a-f]{{64}}", _base_image()
    ), _base_image()


def test_only_the_locked_runtime_dependencies_are_installed() -> None:
    build, _final = stages()
    runs = [args for name, args in build if name == "RUN"]
    into_image = [run for run in runs if "/opt/promsched/bin/python" in run and " install " in run]

    assert into_image == [
        # Every file checked against the lock's hashes, wheels only, and (without --no-deps) a lock
        # missing a dependency is refused.
        "pip --python /opt/promsched/bin/python install --require-hashes --only-binary :all: "
        "-r requirements/runtime.txt",
        # promsched's own wheel, its dependencies already there.
        "pip --python /opt/promsched/bin/python install --no-deps /wheels/promsched-*.whl",
    ], into_image
    assert "pip --python /opt/promsched/bin/python check" in runs
    # The build backend comes from its own lock, into an environment the final stage does not copy.
    assert [run for run in runs if "/opt/build-tools/bin/pip install" in run] == [
        "/opt/build-tools/bin/pip install --require-hashes --only-binary :all: -r requirements/build.txt"
    ]
    assert "/opt/build-tools/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels ." in runs
    # Nothing else is installed or resolved from the index.
    installs = [run for run in runs if " install " in run or " wheel " in run]
    assert len(installs) == 4, installs


def test_the_image_is_labelled_with_its_source_version_and_revision() -> None:
    labels = next(args for name, args in stages()[1] if name == "LABEL")
    args = _final_stage_args()

    assert args["VERSION"] == PYPROJECT["project"]["version"]
    assert {"REVISION", "SOURCE"} <= set(args)
    for label, arg in (("source", "SOURCE"), ("version", "VERSION"), ("revision", "REVISION")):
        assert f'org.opencontainers.image.{label}="${{{arg}}}"' in labels


def test_it_runs_as_a_numeric_non_root_user_matching_the_chart() -> None:
    _build, final = stages()
    users = [args for name, args in final if name == "USER"]
    assert len(users) == 1
    uid, _, gid = users[0].partition(":")

    assert re.fullmatch(r"[1-9][0-9]*", uid), "a numeric UID other than root's 0"
    assert re.fullmatch(r"[1-9][0-9]*", gid), "a numeric GID other than root's 0"
    # The chart's default pod security context (podSecurityContext in values.yaml) runs the image's user.
    assert VALUES["podSecurityContext"]["runAsUser"] == int(uid)
    assert VALUES["podSecurityContext"]["runAsGroup"] == int(gid)


def test_the_entrypoint_is_promsched_run_listening_on_the_charts_port() -> None:
    _build, final = stages()
    entrypoints = [json.loads(args) for name, args in final if name == "ENTRYPOINT"]
    exposed = [args for name, args in final if name == "EXPOSE"]

    assert entrypoints == [["promsched", "run"]]
    assert exposed == [str(VALUES["port"])]
    assert f"PROMSCHED_LISTEN=0.0.0.0:{VALUES['port']}" in DOCKERFILE.read_text()


def test_the_build_context_holds_only_what_the_image_needs() -> None:
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    rules = [line for line in lines if line and not line.startswith("#")]
    assert rules[0] == "*"
    assert {rule for rule in rules if rule.startswith("!")} == {
        "!pyproject.toml",
        "!README.md",
        "!requirements/",
        "!operator/",
    }
    sources = [args.split()[:-1] for name, args in instructions() if name == "COPY" and "--from" not in args]
    assert {source for group in sources for source in group} == {
        "pyproject.toml",
        "README.md",
        "requirements",
        "operator",
    }

    sent = context_files()
    assert [path for path in sent if not path.startswith("operator/")] == [
        "README.md",
        "pyproject.toml",
        "requirements/build.txt",
        "requirements/runtime.txt",
    ]
    assert "operator/promsched/cli.py" in sent
    assert "operator/promsched/py.typed" in sent


def test_the_sandboxs_go_modules_stay_out_of_the_image() -> None:
    # They are package data for an install from the repository (`promsched sandbox install` builds them)...
    gomod = REPO / "operator" / "promsched" / "sandbox" / "builds" / "gomod"
    assert sorted(path.parent.name for path in gomod.glob("*/go.mod")) == [
        "etcd",
        "kubernetes",
        "trimaran",
        "victoriametrics",
    ]
    assert "sandbox/builds/gomod/*/go.mod" in PYPROJECT["tool"]["setuptools"]["package-data"]["promsched"]

    # ...but never reach the image's build context, so its wheel has none.
    sent = context_files()
    assert not [path for path in sent if "/gomod/" in path], sent
    assert not [path for path in sent if "__pycache__" in path or ".egg-info/" in path]


def test_the_runtime_lock_pins_exactly_pyprojects_dependencies() -> None:
    pins = lock_pins(RUNTIME_LOCK)
    declared = {
        normalized(Requirement(spec).name): Requirement(spec) for spec in PYPROJECT["project"]["dependencies"]
    }

    # A dependency added to or dropped from pyproject.toml without `make lock` fails here...
    assert {name for name, pin in pins.items() if FROM_PYPROJECT in pin.required_by} == set(declared), (
        "requirements/runtime.txt is out of date with pyproject.toml's dependencies: run `make lock`"
    )
    # ...and so does a range that no longer admits the locked version.
    outside = {
        name: pins[name].version
        for name, requirement in declared.items()
        if not requirement.specifier.contains(pins[name].version, prereleases=True)
    }
    assert not outside, f"locked versions outside pyproject.toml's ranges: {outside}; run `make lock`"


def test_the_runtime_lock_is_closed_and_holds_no_extra() -> None:
    pins = lock_pins(RUNTIME_LOCK)

    # Every pin is there because pyproject or another pin requires it.
    orphans = {
        name: pin.required_by
        for name, pin in pins.items()
        if FROM_PYPROJECT not in pin.required_by
        and not {normalized(via) for via in pin.required_by} & set(pins)
    }
    assert not orphans
    # The extras (sandbox, test, bench) stay out of the image.
    extras = {
        normalized(Requirement(spec).name)
        for specs in PYPROJECT["project"]["optional-dependencies"].values()
        for spec in specs
    }
    assert "cryptography" in extras
    assert not extras & set(pins), extras & set(pins)


def test_the_build_lock_pins_the_build_system() -> None:
    pins = lock_pins(BUILD_LOCK)
    requires = [Requirement(spec) for spec in PYPROJECT["build-system"]["requires"]]

    assert {normalized(requirement.name) for requirement in requires} <= set(pins), "run `make lock`"
    for requirement in requires:
        assert requirement.specifier.contains(pins[normalized(requirement.name)].version), "run `make lock`"


def test_every_locked_file_is_pinned_to_its_hash_by_make_lock() -> None:
    for lock in (RUNTIME_LOCK, BUILD_LOCK):
        text = lock.read_text()
        pins = lock_pins(lock)
        assert pins
        assert not [pin.name for pin in pins.values() if not pin.hashes], lock
        assert all(
            re.fullmatch(r"sha256:[0-9a-f]{64}", digest) for pin in pins.values() for digest in pin.hashes
        )
        # Every requirement line is a pin (no ranges, URLs or editable installs), and the header names
        # the command that regenerates it.
        requirement_lines = [
            line for line in text.splitlines() if line and not line[0].isspace() and line[0] != "#"
        ]
        assert len(requirement_lines) == len(pins), lock
        assert "#    make lock\n" in text
    assert re.search(r"^lock:", (REPO / "Makefile").read_text(), re.MULTILINE)
