"""`promsched sandbox install`: build or install the pinned components into the per-user cache.

Every component by default, or only those a selection names (`promsched sandbox up` builds just what
it runs). Idempotent: a binary already in the cache is skipped, so a second run takes seconds. Go
builds go to a temporary folder first and are moved into place only when complete, so an interrupted
build never leaves a half-written binary that a later run would trust.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

from promsched.sandbox.builds.components import (
    DEBIAN_PACKAGES,
    GO_BUILDS,
    KWOK_MODULE,
    KWOK_NODE_STAGE_FILES,
    KWOK_NODE_STAGES,
    TRIMARAN_BUILD,
    VICTORIAMETRICS_BUILDS,
    DebianPackage,
    GoBuild,
    bin_dir,
    trimaran_bin_dir,
    victoriametrics_bin_dir,
)
from promsched.sandbox.builds.reporting import BuildProgress, ProgressPrinter

Report = Callable[[str], None]


class InstallError(RuntimeError):
    """A component could not be built or installed; the message says what to do."""


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _require_go() -> None:
    if shutil.which("go") is None:
        raise InstallError("the `go` command is not on PATH; install Go 1.26 or newer to build the sandbox")


def is_built(build: GoBuild, target: Path) -> bool:
    return os.access(target / build.binary, os.X_OK)


def _go_command(build: GoBuild, out_dir: Path) -> tuple[list[str], Path | None, dict[str, str]]:
    env = dict(os.environ, CGO_ENABLED="0", **build.env)
    ldflags = " ".join(("-s", "-w", *build.ldflags))
    # -v names each package as it is compiled: the progress report counts those lines.
    if build.module_dir is not None:
        # Go names a binary after its package path (`server` for etcd's `.../server/v3`): name it ourselves.
        output = str(out_dir / build.binary)
        cmd = ["go", "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", output, build.package]
        return cmd, build.module_dir, env
    env["GOBIN"] = str(out_dir)
    return ["go", "install", "-v", "-trimpath", "-ldflags", ldflags, build.package], None, env


def run_with_progress(
    cmd: list[str], cwd: Path | None, env: dict[str, str], progress: BuildProgress, printer: ProgressPrinter
) -> int:
    """Run a go command, showing what it downloads and compiles at least every `printer.interval`."""
    process = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    stderr = process.stderr

    def drain() -> None:
        for line in stderr:
            progress.feed(line)

    # The go command writes progress to stderr; a thread drains it so the pipe never blocks the build.
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        while True:
            try:
                returncode = process.wait(timeout=printer.interval)
            except subprocess.TimeoutExpired:
                printer.show(progress)
                continue
            reader.join()
            return returncode
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        printer.finish()


def build_go(build: GoBuild, target: Path, report: Report, printer: ProgressPrinter | None = None) -> None:
    _require_go()
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="promsched-build-", dir=target.parent) as tmp:
        out_dir = Path(tmp)
        cmd, cwd, env = _go_command(build, out_dir)
        report(f"  building {build.label} (first build takes minutes; Go caches make later ones fast)")
        progress = BuildProgress(build.label)
        returncode = run_with_progress(cmd, cwd, env, progress, printer or ProgressPrinter())
        if returncode != 0:
            details = "\n".join(progress.other_lines[-60:])
            raise InstallError(f"building {build.label} failed: {' '.join(cmd)}\n{details}")
        built = out_dir / build.binary
        if not built.exists():
            raise InstallError(f"building {build.label} produced no {build.binary} binary")
        os.replace(built, target / build.binary)
        report(
            f"  built {build.label} in {progress.clock() - progress.started:.0f}s "
            f"({progress.downloads} module(s) downloaded, {progress.packages} package(s) compiled)"
        )


def _installed_debian_version(package: str) -> str | None:
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status} ${Version}", package], capture_output=True, text=True, check=False
    )
    words = result.stdout.split()
    if result.returncode != 0 or "installed" not in words[:3]:
        return None
    return words[-1]


def install_debian(
    packages: tuple[DebianPackage, ...],
    report: Report,
    purpose: str = "the sandbox's Prometheus and node_exporter",
) -> None:
    missing = [p for p in packages if _installed_debian_version(p.package) is None]
    for package in packages:
        version = _installed_debian_version(package.package)
        if version is not None and version != package.version:
            report(f"  {package.package} {version} is installed; promsched pins {package.version}")
    if not missing:
        return
    specs = [f"{p.package}={p.version}" for p in missing]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise InstallError(
            f"missing Debian packages; run: sudo apt-get install --no-install-recommends {' '.join(specs)}"
        )
    report(f"  apt-get install {' '.join(specs)} ({purpose})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    apt = ["apt-get", "install", "-y", "--no-install-recommends", *specs]
    if subprocess.run(apt, env=env, capture_output=True, check=False).returncode != 0:
        report("  apt-get update (the package lists do not have those versions yet)")
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
        result = subprocess.run(apt, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise InstallError(f"apt-get install {' '.join(specs)} failed:\n{result.stderr.strip()}")


def install_kwok_stages(target: Path, report: Report) -> None:
    """kwok's node stages from its pinned module, as one multi-document file for `kwok --config`."""
    report(f"  kwok node stages from {KWOK_MODULE}")
    _require_go()
    result = subprocess.run(
        ["go", "mod", "download", "-json", KWOK_MODULE], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise InstallError(
            f"go mod download {KWOK_MODULE} failed:\n{(result.stdout + result.stderr).strip()}"
        )
    module_dir = Path(json.loads(result.stdout)["Dir"])
    documents = [(module_dir / name).read_text().strip() for name in KWOK_NODE_STAGE_FILES]
    staged = target / f"{KWOK_NODE_STAGES}.partial"
    staged.write_text("\n---\n".join(documents) + "\n")
    staged.replace(target / KWOK_NODE_STAGES)


def selected_builds(only: Collection[str] | None) -> tuple[GoBuild, ...]:
    """The Go builds of the binaries in `only` (every one when None); a name no build makes is refused."""
    if only is None:
        return GO_BUILDS
    unknown = set(only) - {build.binary for build in GO_BUILDS}
    if unknown:
        raise InstallError(f"no sandbox component builds {', '.join(sorted(unknown))}")
    return tuple(build for build in GO_BUILDS if build.binary in only)


def install(report: Report = _print, only: Collection[str] | None = None) -> Path:
    """Make the sandbox's components available, or only the binaries named in `only` (with Prometheus,
    node_exporter and kwok's node stages, which every sandbox runs); returns the folder holding them."""
    target = bin_dir()
    started = time.monotonic()
    report(f"promsched sandbox install -> {target}")
    install_debian(DEBIAN_PACKAGES, report)
    for build in selected_builds(only):
        if is_built(build, target):
            report(f"  {build.label}: cached")
        else:
            build_go(build, target, report)
    if not (target / KWOK_NODE_STAGES).exists():
        install_kwok_stages(target, report)
    report(f"sandbox components ready in {time.monotonic() - started:.0f}s")
    return target


def _install_apart(builds: tuple[GoBuild, ...], target: Path, report: Report) -> Path:
    for build in builds:
        if is_built(build, target):
            report(f"  {build.label}: cached")
        else:
            build_go(build, target, report)
    return target


def install_trimaran(report: Report = _print) -> Path:
    """Build Trimaran (see `components.TRIMARAN_BUILD`) unless cached; returns the folder holding it."""
    return _install_apart((TRIMARAN_BUILD,), trimaran_bin_dir(), report)


def install_victoriametrics(report: Report = _print) -> Path:
    """Build VictoriaMetrics single-node and vmalert (see `components.VICTORIAMETRICS_BUILDS`) unless
    cached; returns the folder holding them."""
    return _install_apart(VICTORIAMETRICS_BUILDS, victoriametrics_bin_dir(), report)
