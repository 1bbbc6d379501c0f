"""`make dist`'s artifacts after the wheel and sdist: the chart's package, the image as an OCI archive,
and the krew plugin for `kubectl promsched` (its archive and manifest), all in one folder with a
SHA256SUMS of everything there.

The plugin's archive holds a launcher, `kubectl-promsched`, and beside it lib/: the wheel and the
runtime lock's wheels for one platform (CPython 3.11 on x86-64 Linux), as `pip install --target` lays
them out. krew links the launcher onto PATH; the launcher runs python3.11 with lib/ first on its path.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from promsched.sandbox.builds import imaging, installing
from promsched.sandbox.builds.components import bin_dir

Report = Callable[[str], None]
REPOSITORY = Path(__file__).resolve().parents[4]
CHART = REPOSITORY / "charts" / "promsched"
RUNTIME_LOCK = REPOSITORY / "requirements" / "runtime.txt"
LICENSE = REPOSITORY / "LICENSE"

PLUGIN = "promsched"
LAUNCHER_NAME = f"kubectl-{PLUGIN}"
# The one platform the archive's compiled wheels (pydantic-core, orjson, aiohttp...) run on: krew's
# selector, and pip's tags for the lock's wheels (manylinux2014: glibc 2.17 or newer).
PLUGIN_OS, PLUGIN_ARCH = "linux", "amd64"
WHEEL_PLATFORM = "manylinux2014_x86_64"
PLUGIN_PYTHON = "3.11"
KREW_API_VERSION = "krew.sigs.k8s.io/v1alpha2"
# The archive's entries carry this time (1980-01-01, as wheels' zip entries may), so a rebuild from the
# same wheels gives the same sha256.
ARCHIVE_MTIME = 315532800

LAUNCHER = f'''#!/usr/bin/env python{PLUGIN_PYTHON}
"""{LAUNCHER_NAME}: `kubectl {PLUGIN}`, run with the packages in lib/ beside this file."""
import os
import sys

# krew links this file onto PATH: lib/ is found beside the file itself, not beside the link.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
from promsched.cli import kubectl_main  # noqa: E402

sys.exit(kubectl_main())
'''

# What `make image` prints as its last line: localhost/promsched:<version>@sha256:<digest>.
IMAGE_REFERENCE = re.compile(r"(?P<tagged>[^\s@]+:[\w][\w.-]*)@(?P<digest>sha256:[0-9a-f]{64})")


class _ManifestDumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks (`|`), as krew-index's manifests write descriptions."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_ManifestDumper.add_representer(str, _represent_text)


class ReleaseError(RuntimeError):
    """An artifact could not be made; the message says what to do."""


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _run(command: Sequence[str], what: str) -> str:
    result = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ReleaseError(f"{what} failed: {' '.join(command)}\n{(result.stdout + result.stderr).strip()}")
    return result.stdout


def chart_home(chart: Path = CHART) -> str:
    home = yaml.safe_load((chart / "Chart.yaml").read_text()).get("home")
    if not home:
        raise ReleaseError(
            f"{chart / 'Chart.yaml'} has no `home`: the krew manifest's homepage is taken from it"
        )
    return str(home)


def helm(report: Report) -> Path:
    """The sandbox's helm, built first when it is not yet."""
    (build,) = installing.selected_builds({"helm"})
    if not installing.is_built(build, bin_dir()):
        installing.build_go(build, bin_dir(), report)
    return bin_dir() / build.binary


def package_chart(out: Path, report: Report, chart: Path = CHART) -> Path:
    """`helm lint --strict`, then `helm package` into `out`; returns the package."""
    binary = str(helm(report))
    report(f"helm lint --strict {chart}")
    _run([binary, "lint", "--strict", str(chart)], "helm lint")
    saved = _run([binary, "package", str(chart), "--destination", str(out)], "helm package")
    # helm says "Successfully packaged chart and saved it to: <path>".
    package = Path(saved.strip().rsplit(": ", 1)[-1])
    report(f"chart: {package}")
    return package


def parse_image_reference(reference: str) -> tuple[str, str]:
    """The tagged name and the digest of `make image`'s last line."""
    match = IMAGE_REFERENCE.fullmatch(reference.strip())
    if match is None:
        raise ReleaseError(
            f"`make image` printed no image reference as its last line (got {reference.strip()!r}); "
            "its errors are above"
        )
    return match["tagged"], match["digest"]


def export_image(reference: str, out: Path, version: str, report: Report) -> Path:
    """The image in promsched's container storage as an OCI archive, with its digest in `<archive>.digest`."""
    tagged, digest = parse_image_reference(reference)
    storage = imaging.default_storage().prepare()
    image = imaging.inspect(storage, tagged)
    if image.digest != digest:
        raise ReleaseError(
            f"{tagged} is {image.digest} in the storage now, not {digest}: run `make image` again"
        )
    archive = out / f"promsched-{version}.oci.tar"
    archived = imaging.push(storage, image, f"oci-archive:{archive}")
    (out / f"{archive.name}.digest").write_text(f"{archived}\n")
    report(f"image: {archive} ({archived})")
    if archived != digest:
        report(f"  not make image's {digest}: the archive's is what skopeo copy --preserve-digests publishes")
    return archive


def install_plugin_packages(wheel: Path, lib: Path, report: Report, lock: Path = RUNTIME_LOCK) -> None:
    """The lock's wheels for the plugin's platform, with their hashes checked, and the wheel, into `lib`."""
    report(f"pip: the runtime lock's wheels for CPython {PLUGIN_PYTHON} on {WHEEL_PLATFORM} -> {lib}")
    _run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--target", str(lib), "--no-compile", "--require-hashes", "--only-binary=:all:",
            "--platform", WHEEL_PLATFORM, "--python-version", PLUGIN_PYTHON, "--implementation", "cp",
            "-r", str(lock),
        ],
        "pip install of the runtime lock",
    )  # fmt: skip
    # Their console scripts name the interpreter that ran pip; the launcher is the only command.
    shutil.rmtree(lib / "bin", ignore_errors=True)
    # promsched's wheel is pure Python: unpacked, it is installed, as pip would, less the PEP 610 record
    # of where it came from (a path on this machine).
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(lib)


def _add(archive: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    entry = tarfile.TarInfo(name)
    entry.size, entry.mode, entry.mtime = len(data), mode, ARCHIVE_MTIME
    archive.addfile(entry, io.BytesIO(data))


def plugin_archive(lib: Path, out: Path, version: str, license_file: Path = LICENSE) -> Path:
    """kubectl-promsched-v<version>-linux-amd64.tar.gz: the launcher, LICENSE and lib/, in a stable order."""
    path = out / f"{LAUNCHER_NAME}-v{version}-{PLUGIN_OS}-{PLUGIN_ARCH}.tar.gz"
    with (
        path.open("wb") as file,
        # No name and a fixed time in the gzip header, as in the entries: the same files, the same bytes.
        gzip.GzipFile(filename="", mode="wb", fileobj=file, mtime=ARCHIVE_MTIME) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive,
    ):
        _add(archive, LAUNCHER_NAME, LAUNCHER.encode(), 0o755)
        _add(archive, "LICENSE", license_file.read_bytes(), 0o644)
        for source in sorted(lib.rglob("*")):
            if source.is_file():
                _add(archive, f"lib/{source.relative_to(lib)}", source.read_bytes(), 0o644)
    return path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def krew_manifest(version: str, archive: Path, release_url: str, homepage: str) -> dict[str, Any]:
    """The krew-index Plugin for `archive`, downloaded from `release_url`/<archive name>."""
    return {
        "apiVersion": KREW_API_VERSION,
        "kind": "Plugin",
        "metadata": {"name": PLUGIN},
        "spec": {
            "version": f"v{version}",
            "homepage": homepage,
            "shortDescription": "Explain and score promsched's pod placements",
            "description": (
                "promsched is a load-aware Kubernetes secondary scheduler that places pods by live\n"
                "Prometheus node metrics. This plugin carries what a user runs against a cluster:\n"
                "`kubectl promsched explain -n NS POD` says why a pod went where it did, `score` ranks\n"
                "the nodes for a policy file now (binds nothing), `status` shows each policy's mode,\n"
                "readiness, last decisions, unschedulable pods and rebalancing; `completion` prints a\n"
                "bash, zsh or fish completion script. kubectl's own flags go after the command:\n"
                "`kubectl promsched explain --context prod -n shop web-0`.\n"
            ),
            "caveats": (
                f"This plugin is Python: it runs python{PLUGIN_PYTHON}, which must be on PATH (Debian 12's\n"
                f"python3 package installs it). The Python packages it needs come with it.\n"
            ),
            "platforms": [
                {
                    "selector": {"matchLabels": {"os": PLUGIN_OS, "arch": PLUGIN_ARCH}},
                    "uri": f"{release_url.rstrip('/')}/{archive.name}",
                    "sha256": sha256(archive),
                    "files": [
                        {"from": LAUNCHER_NAME, "to": "."},
                        {"from": "lib", "to": "."},
                        {"from": "LICENSE", "to": "."},
                    ],
                    "bin": LAUNCHER_NAME,
                }
            ],
        },
    }


def check_plugin(archive: Path, version: str) -> None:
    """Run `kubectl-promsched --version` from the archive as krew installs it (extracted, linked onto
    PATH): a package missing for the platform fails here, not on a user's machine."""
    with tempfile.TemporaryDirectory(prefix="promsched-krew-check-") as folder:
        store, links = Path(folder) / "store", Path(folder) / "bin"
        with tarfile.open(archive) as opened:
            opened.extractall(store, filter="data")
        links.mkdir()
        (links / LAUNCHER_NAME).symlink_to(store / LAUNCHER_NAME)
        if shutil.which(f"python{PLUGIN_PYTHON}") is None:
            raise ReleaseError(f"python{PLUGIN_PYTHON} is not on PATH: the plugin's check runs it")
        said = _run([str(links / LAUNCHER_NAME), "--version"], f"{LAUNCHER_NAME} --version").strip()
        if said != f"promsched {version}":
            raise ReleaseError(f"{LAUNCHER_NAME} --version said {said!r}, not 'promsched {version}'")


def write_krew_plugin(wheel: Path, out: Path, version: str, release_url: str, report: Report) -> Path:
    """The plugin's archive in `out`, and its manifest as out/krew/promsched.yaml (krew-index's name)."""
    with tempfile.TemporaryDirectory(prefix="promsched-krew-") as folder:
        lib = Path(folder) / "lib"
        install_plugin_packages(wheel, lib, report)
        archive = plugin_archive(lib, out, version)
    check_plugin(archive, version)
    manifest = out / "krew" / f"{PLUGIN}.yaml"
    manifest.parent.mkdir(exist_ok=True)
    document = krew_manifest(version, archive, release_url, chart_home())
    manifest.write_text(yaml.dump(document, Dumper=_ManifestDumper, sort_keys=False))
    report(f"krew plugin: {archive} and {manifest}")
    return manifest


def write_checksums(out: Path) -> Path:
    """out/SHA256SUMS, as `sha256sum` writes it and `sha256sum -c` reads it, of every file under `out`."""
    files = sorted(path for path in out.rglob("*") if path.is_file() and path.name != "SHA256SUMS")
    sums = out / "SHA256SUMS"
    sums.write_text("".join(f"{sha256(path)}  {path.relative_to(out)}\n" for path in files))
    return sums


def main(argv: Sequence[str] | None = None, report: Report = _print) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m promsched.sandbox.builds.releasing",
        description="Add the chart, image and krew plugin to a folder holding promsched's wheel.",
    )
    parser.add_argument("--out", type=Path, default=Path("dist"), help="the folder (default dist)")
    parser.add_argument("--image", required=True, help="the last line of `make image`")
    parser.add_argument(
        "--release-url",
        help="where the krew archive will be downloaded from (default: the chart's home "
        "/releases/download/v<version>, a GitHub release)",
    )
    args = parser.parse_args(argv)
    version = imaging.project_version(REPOSITORY)
    out: Path = args.out
    try:
        wheels = sorted(out.glob(f"promsched-{version}-*.whl"))
        if len(wheels) != 1:
            raise ReleaseError(f"expected one promsched {version} wheel in {out}, found {len(wheels)}")
        package_chart(out, report)
        export_image(args.image, out, version, report)
        release_url = args.release_url or f"{chart_home()}/releases/download/v{version}"
        write_krew_plugin(wheels[0], out, version, release_url, report)
        report(f"checksums: {write_checksums(out)}")
    except (ReleaseError, installing.InstallError, imaging.ImageError) as error:
        print(f"make dist: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
