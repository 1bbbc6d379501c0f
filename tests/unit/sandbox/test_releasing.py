"""`make dist`'s krew plugin (archive and manifest), image reference and checksums, without pip or helm:
the plugin's lib/ is a stand-in promsched that prints how it was called."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from promsched.sandbox.builds import releasing

VERSION = "1.2.3"
RELEASE_URL = "https://example.test/releases/download/v1.2.3/"
HOMEPAGE = "https://example.test/promsched"
STAND_IN_CLI = """import sys

def kubectl_main():
    if sys.argv[1:] == ["--version"]:
        print("promsched 1.2.3")
        return 0
    print("kubectl_main", sys.argv[1:])
    return 3
"""
needs_python = pytest.mark.skipif(shutil.which("python3.11") is None, reason="the launcher runs python3.11")


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    package = tmp_path / "lib" / "promsched"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text(STAND_IN_CLI)
    return tmp_path / "lib"


@pytest.fixture
def archive(lib: Path, tmp_path: Path) -> Path:
    out = tmp_path / "dist"
    out.mkdir()
    license_file = tmp_path / "LICENSE"
    license_file.write_text("the license\n")
    return releasing.plugin_archive(lib, out, VERSION, license_file)


def test_the_manifest_is_a_krew_plugin_for_the_archive_it_names(archive: Path) -> None:
    manifest = releasing.krew_manifest(VERSION, archive, RELEASE_URL, HOMEPAGE)
    assert (manifest["apiVersion"], manifest["kind"]) == ("krew.sigs.k8s.io/v1alpha2", "Plugin")
    assert manifest["metadata"] == {"name": "promsched"}
    spec = manifest["spec"]
    assert spec["version"] == "v1.2.3"
    assert spec["homepage"] == HOMEPAGE
    assert spec["shortDescription"]
    assert spec["description"]
    # It names the plugin's commands and none it does not carry.
    assert all(f"`{name}`" in spec["description"] for name in ("score", "status", "completion"))
    assert "kubectl promsched explain" in spec["description"]
    assert "convert" not in spec["description"]
    assert "python3.11" in spec["caveats"]
    (platform,) = spec["platforms"]
    assert platform["selector"] == {"matchLabels": {"os": "linux", "arch": "amd64"}}
    assert platform["uri"] == f"https://example.test/releases/download/v1.2.3/{archive.name}"
    assert platform["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert platform["bin"] == "kubectl-promsched"
    with tarfile.open(archive) as opened:
        top_level = {name.split("/")[0] for name in opened.getnames()}
    assert (
        {entry["from"] for entry in platform["files"]} == top_level == {"kubectl-promsched", "lib", "LICENSE"}
    )


def test_the_archive_holds_an_executable_launcher_and_the_packages(archive: Path) -> None:
    with tarfile.open(archive) as opened:
        members = {member.name: member for member in opened.getmembers()}
    assert archive.name == "kubectl-promsched-v1.2.3-linux-amd64.tar.gz"
    assert members["kubectl-promsched"].mode == 0o755
    assert {"lib/promsched/__init__.py", "lib/promsched/cli.py", "LICENSE"} <= members.keys()
    assert all(member.uid == 0 and member.uname == "" for member in members.values())


def test_the_same_packages_make_the_same_archive(lib: Path, archive: Path, tmp_path: Path) -> None:
    first = archive.read_bytes()
    os.utime(lib / "promsched" / "cli.py", (0, 0))
    again = releasing.plugin_archive(lib, archive.parent, VERSION, tmp_path / "LICENSE")
    assert again.read_bytes() == first


@needs_python
def test_the_launcher_runs_kubectl_main_with_its_lib_through_a_link_as_krew_installs_it(
    archive: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    with tarfile.open(archive) as opened:
        opened.extractall(store, filter="data")
    links = tmp_path / "bin"
    links.mkdir()
    (links / "kubectl-promsched").symlink_to(store / "kubectl-promsched")
    result = subprocess.run(
        [str(links / "kubectl-promsched"), "explain", "default/web-0"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
    )
    assert (result.returncode, result.stdout) == (3, "kubectl_main ['explain', 'default/web-0']\n")


def test_make_images_last_line_gives_the_tag_and_the_digest() -> None:
    digest = "sha256:" + "ab" * 32
    assert releasing.parse_image_reference(f"localhost/promsched:0.1.0@{digest}\n") == (
        "localhost/promsched:0.1.0",
        digest,
    )


@pytest.mark.parametrize("line", ["", "STEP 3/9: RUN pip install", "localhost/promsched:0.1.0@sha256:abc"])
def test_anything_else_than_a_digest_reference_is_refused_naming_make_image(line: str) -> None:
    with pytest.raises(releasing.ReleaseError, match="`make image` printed no image reference"):
        releasing.parse_image_reference(line)


def test_the_checksums_cover_every_artifact_as_sha256sum_checks_them(archive: Path) -> None:
    out = archive.parent
    (out / "krew").mkdir()
    (out / "krew" / "promsched.yaml").write_text("kind: Plugin\n")
    sums = releasing.write_checksums(out)
    releasing.write_checksums(out)  # a second run does not list the sums themselves
    listed = [line.split("  ")[1] for line in sums.read_text().splitlines()]
    assert listed == ["krew/promsched.yaml", archive.name]
    if shutil.which("sha256sum"):
        check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, check=False)
        assert check.returncode == 0, check.stdout


@needs_python
def test_a_plugin_that_does_not_run_as_the_version_it_is_released_as_is_refused(archive: Path) -> None:
    releasing.check_plugin(archive, VERSION)
    with pytest.raises(
        releasing.ReleaseError, match=re.escape("said 'promsched 1.2.3', not 'promsched 9.9.9'")
    ):
        releasing.check_plugin(archive, "9.9.9")


@needs_python
def test_the_written_manifest_reads_back_as_the_plugin_of_the_archive_beside_it(
    lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stand_in_packages(_wheel: Path, target: Path, _report: releasing.Report) -> None:
        shutil.copytree(lib, target)

    monkeypatch.setattr(releasing, "install_plugin_packages", stand_in_packages)
    monkeypatch.setattr(releasing, "chart_home", lambda: HOMEPAGE)
    out = tmp_path / "dist"
    out.mkdir()
    written = releasing.write_krew_plugin(
        tmp_path / "unused.whl", out, VERSION, RELEASE_URL, lambda _line: None
    )
    assert written == out / "krew" / "promsched.yaml"
    manifest = yaml.safe_load(written.read_text())
    (archive,) = out.glob("kubectl-promsched-*.tar.gz")
    assert manifest == releasing.krew_manifest(VERSION, archive, RELEASE_URL, HOMEPAGE)
    assert manifest["spec"]["platforms"][0]["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert "description: |" in written.read_text()
