"""`promsched sandbox install`'s selection: what each selection builds, and only what is not cached."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from promsched.cli import main
from promsched.sandbox.builds import installing
from promsched.sandbox.builds.components import GO_BUILDS, SANDBOX_UP_BINARIES, GoBuild, bin_dir


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache, and builds that only record what they were asked to build."""
    monkeypatch.setenv("PROMSCHED_CACHE", str(tmp_path))
    monkeypatch.setattr(installing, "install_debian", lambda _packages, _report: None)
    monkeypatch.setattr(installing, "install_kwok_stages", lambda _target, _report: None)
    return tmp_path


def built_by_install(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []

    def build_go(build: GoBuild, target: Path, _report: installing.Report) -> None:
        built.append(build.binary)
        _executable(target / build.binary)

    monkeypatch.setattr(installing, "build_go", build_go)
    return built


def _executable(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_the_demo_selection_is_what_a_sandbox_runs_without_the_tests_tools() -> None:
    selected = {build.binary for build in installing.selected_builds(SANDBOX_UP_BINARIES)}
    assert selected == {"etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "kwok"}
    everything = {build.binary for build in installing.selected_builds(None)}
    assert everything - selected == {"helm", "kube-scheduler"}


def test_a_selection_naming_a_binary_no_build_makes_is_refused() -> None:
    with pytest.raises(installing.InstallError, match="no sandbox component builds kubelet"):
        installing.selected_builds({"etcd", "kubelet"})


def test_install_builds_only_the_selected_binaries_not_yet_cached(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = built_by_install(monkeypatch)
    _executable(bin_dir() / "etcd")
    lines: list[str] = []
    assert installing.install(lines.append, only=SANDBOX_UP_BINARIES) == bin_dir()
    assert built == ["kwok", "kube-apiserver", "kube-controller-manager", "kubectl"]
    assert any(line.endswith(": cached") and line.strip().startswith("etcd") for line in lines)


def test_a_full_install_after_the_demo_builds_only_what_the_demo_left_out(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = built_by_install(monkeypatch)
    installing.install(lambda _line: None, only=SANDBOX_UP_BINARIES)
    built.clear()
    installing.install(lambda _line: None)
    assert built == ["helm", "kube-scheduler"]


def test_a_binary_that_is_not_executable_is_built_again(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = built_by_install(monkeypatch)
    (bin_dir()).mkdir(parents=True)
    (bin_dir() / "kwok").write_text("half written")
    installing.install(lambda _line: None, only={"kwok"})
    assert built == ["kwok"]
    assert os.access(bin_dir() / "kwok", os.X_OK)


@pytest.mark.parametrize("binary", ["etcd", "kube-scheduler"])
def test_a_wrapper_module_build_names_its_one_binary(tmp_path: Path, binary: str) -> None:
    build = next(b for b in GO_BUILDS if b.binary == binary)
    command, cwd, _env = installing._go_command(build, tmp_path)
    assert cwd == build.module_dir
    assert command[command.index("-o") + 1] == str(tmp_path / binary)
    assert command[-1] == build.package


def test_a_module_aware_build_installs_into_the_output_folder(tmp_path: Path) -> None:
    build = next(b for b in GO_BUILDS if b.binary == "helm")
    command, cwd, env = installing._go_command(build, tmp_path)
    assert (command[:2], cwd, env["GOBIN"]) == (["go", "install"], None, str(tmp_path))
    assert command[-1] == build.package


@pytest.mark.parametrize(
    ("arguments", "only"),
    [(["--only", "demo"], SANDBOX_UP_BINARIES), ([], None), (["--with", "trimaran"], None)],
)
def test_the_install_command_passes_its_selection(
    monkeypatch: pytest.MonkeyPatch, arguments: list[str], only: frozenset[str] | None
) -> None:
    calls: list[object] = []
    monkeypatch.setattr(installing, "install", lambda only=None: calls.append(only) or Path())
    monkeypatch.setattr(installing, "install_trimaran", lambda: calls.append("trimaran") or Path())
    assert main(["sandbox", "install", *arguments]) == 0
    assert calls == [only, *(["trimaran"] if "trimaran" in arguments else [])]
