"""`promsched sandbox image` without buildah: what it configures, the commands it would run, its cache key
and its errors. The build itself is proven by tests/integration/test_image_from_chart.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from promsched import cli
from promsched.sandbox.builds import imaging, installing

REPO = Path(__file__).parents[3]


def test_the_storage_is_promscheds_own_with_runc_and_no_default_ulimits(tmp_path: Path) -> None:
    storage = imaging.ContainerStorage(tmp_path / "containers").prepare()

    storage_conf = tomllib.loads(storage.storage_conf.read_text())["storage"]
    containers_conf = tomllib.loads(storage.containers_conf.read_text())
    assert storage_conf == {
        "driver": "overlay",
        "graphroot": str(tmp_path / "containers" / "storage"),
        "runroot": str(tmp_path / "containers" / "run"),
    }
    assert containers_conf["containers"]["default_ulimits"] == []
    assert containers_conf["engine"]["runtime"] == "runc"
    assert containers_conf["engine"]["cgroup_manager"] == "cgroupfs"
    assert storage.env() == {
        "CONTAINERS_STORAGE_CONF": str(storage.storage_conf),
        "CONTAINERS_CONF": str(storage.containers_conf),
    }


def test_preparing_again_leaves_the_files_untouched(tmp_path: Path) -> None:
    storage = imaging.ContainerStorage(tmp_path).prepare()
    written = storage.storage_conf.stat().st_mtime_ns

    imaging.ContainerStorage(tmp_path).prepare()

    assert storage.storage_conf.stat().st_mtime_ns == written


def test_the_base_key_follows_every_input_of_the_base(monkeypatch: pytest.MonkeyPatch) -> None:
    key = imaging.base_key("mmdebstrap 1.3.5")
    assert imaging.base_key("mmdebstrap 1.3.5") == key
    assert imaging.base_key("mmdebstrap 1.4.0") != key
    monkeypatch.setattr(imaging, "BASE_PACKAGES", (*imaging.BASE_PACKAGES[:-1], "ca-certificates=1"))
    assert imaging.base_key("mmdebstrap 1.3.5") != key
    assert imaging.base_reference(key) == f"localhost/promsched-base:bookworm-py311-{key}"


def test_the_base_is_bootstrapped_from_the_pinned_packages_and_sources(tmp_path: Path) -> None:
    command = imaging.mmdebstrap_command(tmp_path)

    assert command[0] == "mmdebstrap"
    assert f"--include={','.join(imaging.BASE_PACKAGES)}" in command
    assert command[-len(imaging.BASE_SOURCES) - 2 :] == ["bookworm", str(tmp_path), *imaging.BASE_SOURCES]
    # `python` and `pip`, as the Dockerfile's build stage calls them, and pinned versions only.
    names = {spec.split("=")[0] for spec in imaging.BASE_PACKAGES}
    assert {"python-is-python3", "python3-pip", "python3-venv"} <= names
    assert all("=" in spec for spec in imaging.BASE_PACKAGES)


def test_the_build_passes_the_base_through_the_dockerfiles_own_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "ca.crt"
    monkeypatch.setattr(imaging, "HOST_CA_BUNDLE", str(bundle))
    arguments = imaging.build_arguments("localhost/promsched-base:x", "0.1.0", "abc")

    without_bundle = imaging.bud_command(REPO, "localhost/promsched:0.1.0", arguments)
    bundle.write_text("")
    with_bundle = imaging.bud_command(REPO, "localhost/promsched:0.1.0", arguments)

    assert "--build-arg=PYTHON_IMAGE=localhost/promsched-base:x" in without_bundle
    assert "ARG PYTHON_IMAGE=" in (REPO / "Dockerfile").read_text()
    assert "--build-arg=VERSION=0.1.0" in without_bundle
    assert without_bundle[-3:] == ["--tag", "localhost/promsched:0.1.0", str(REPO)]
    assert not [arg for arg in without_bundle if arg.startswith("--volume")]
    assert f"--volume={bundle}:{bundle}:ro" in with_bundle


def test_the_image_is_tagged_with_the_projects_version() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    dockerfile_default = f"ARG VERSION={version}"

    assert imaging.project_version(REPO) == version
    assert dockerfile_default in (REPO / "Dockerfile").read_text()


def test_a_folder_without_a_dockerfile_is_refused_before_anything_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_install(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("nothing may be installed for a folder without a Dockerfile")

    monkeypatch.setattr(imaging, "install_tools", no_install)

    with pytest.raises(imaging.ImageError, match=r"no Dockerfile in .*: run this from the repository's root"):
        imaging.build(tmp_path)


def test_without_root_the_missing_tools_are_named_with_their_pinned_versions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(installing, "_installed_debian_version", lambda _package: None)
    monkeypatch.setattr("os.geteuid", lambda: 1000)

    with pytest.raises(installing.InstallError) as raised:
        imaging.install_tools(imaging.BUILD_PACKAGES)

    message = str(raised.value)
    assert "sudo apt-get install --no-install-recommends" in message
    for package in imaging.BUILD_PACKAGES:
        assert f"{package.package}={package.version}" in message


def test_without_root_the_build_stops_before_touching_any_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(imaging, "install_tools", lambda _packages, _report: None)
    monkeypatch.setattr("os.geteuid", lambda: 1000)

    with pytest.raises(imaging.ImageError, match="needs root"):
        imaging.build(REPO, imaging.ContainerStorage(tmp_path / "containers"))

    assert not (tmp_path / "containers").exists()


def test_make_images_last_line_is_the_reference_with_its_digest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built = imaging.BuiltImage("localhost/promsched:0.1.0", "sha256:" + "ab" * 32, "sha256:" + "cd" * 32, 1)
    contexts: list[Path] = []

    def build(context: Path) -> imaging.BuiltImage:
        contexts.append(context)
        return built

    monkeypatch.setattr(imaging, "build", build)

    assert cli.main(["sandbox", "image", "--context", str(REPO)]) == 0

    assert contexts == [REPO]
    assert capsys.readouterr().out.splitlines()[-1] == f"localhost/promsched:0.1.0@sha256:{'ab' * 32}"


def test_a_failed_build_is_reported_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def build(_context: Path) -> imaging.BuiltImage:
        raise imaging.ImageError("buildah bud ... failed (1)")

    monkeypatch.setattr(imaging, "build", build)

    assert cli.main(["sandbox", "image"]) == 1
    assert capsys.readouterr().err == "promsched: buildah bud ... failed (1)\n"
