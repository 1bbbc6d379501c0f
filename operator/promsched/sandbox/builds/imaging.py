"""`promsched sandbox image`: the repository's Dockerfile built without a Docker daemon.

buildah builds the Dockerfile as written into a container storage of promsched's own (under the cache
folder, so it never meets another storage's configuration), with runc as the OCI runtime. The storage
uses the kernel's overlay filesystem: vfs works too, but copies every layer whole (a cold build took
7 minutes and 6 GiB with it, 1.5 minutes and 0.6 GiB with overlay). The Dockerfile's
base (python:3.11-slim, on Docker Hub) is replaced, through its PYTHON_IMAGE argument, by a Debian
bookworm root filesystem made by mmdebstrap from pinned packages: Docker Hub need not be reachable. That
base is tagged with a digest of what made it, so it is built once per change of its inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from promsched.sandbox.builds.components import DebianPackage, cache_root
from promsched.sandbox.builds.installing import install_debian

Report = Callable[[str], None]

# The tools, at Debian 12's versions (as the sandbox's Prometheus is pinned): buildah builds, podman
# inspects and runs. crun is not used: it needs cgroup v2 or setrlimit, which a container-in-a-VM
# machine may not allow; runc runs there.
BUILD_PACKAGES: tuple[DebianPackage, ...] = (
    DebianPackage("buildah", "1.28.2+ds1-3+deb12u1+b3", "buildah"),
    DebianPackage("podman", "4.3.1+ds1-8+deb12u1+b3", "podman"),
    DebianPackage("runc", "1.1.5+ds1-1+deb12u1", "runc"),
    DebianPackage("mmdebstrap", "1.3.5-7", "mmdebstrap"),
)
# What serves the image from a registry on 127.0.0.1 (the image-from-chart test).
REGISTRY_PACKAGES: tuple[DebianPackage, ...] = (
    DebianPackage("docker-registry", "2.8.2+ds1-1", "docker-registry"),
)

# The base: what python:3.11-slim-bookworm provides the Dockerfile (`python`, `pip`, `python -m venv`),
# from Debian's packages. Pinned like the tools; mmdebstrap resolves their dependencies from the same
# suites, so the pins decide the interpreter.
BASE_SUITE = "bookworm"
BASE_SOURCES = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
BASE_PACKAGES = (
    "python3.11=3.11.2-6+deb12u9",
    "python3.11-venv=3.11.2-6+deb12u9",
    "python3-venv=3.11.2-1+b1",
    "python3-pip=23.0.1+dfsg-1",
    "python-is-python3=3.11.2-1+deb12u1",
    "ca-certificates=20250419~deb12u2",
)
# Documentation is of no use in an image; copyright files stay, as Debian's slim images keep them.
BASE_DPKG_OPTIONS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
)
# Debian's bundle, where Debian's pip (and the base's) reads its trusted CAs.
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
BASE_REPOSITORY = "localhost/promsched-base"
IMAGE_REPOSITORY = "localhost/promsched"

# containers.conf for buildah and podman here: runc with cgroupfs (no systemd), no default ulimits
# (raising them is not permitted in every container), logs and events in files (no journald).
CONTAINERS_CONF = """\
[containers]
default_ulimits = []
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""
STORAGE_DRIVER = "overlay"


class ImageError(RuntimeError):
    """The image could not be built or stored; the message says what failed."""


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ContainerStorage:
    """promsched's own container storage and the configuration files buildah and podman read for it."""

    root: Path

    @property
    def storage_conf(self) -> Path:
        return self.root / "storage.conf"

    @property
    def containers_conf(self) -> Path:
        return self.root / "containers.conf"

    def prepare(self) -> ContainerStorage:
        self.root.mkdir(parents=True, exist_ok=True)
        storage = (
            f'[storage]\ndriver = "{STORAGE_DRIVER}"\ngraphroot = "{self.root / "storage"}"\n'
            f'runroot = "{self.root / "run"}"\n'
        )
        for path, text in (
            (self.storage_conf, storage),
            (self.containers_conf, CONTAINERS_CONF),
        ):
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
        return self

    def env(self) -> dict[str, str]:
        """The variables that point buildah, podman and skopeo at this storage."""
        return {
            "CONTAINERS_STORAGE_CONF": str(self.storage_conf),
            "CONTAINERS_CONF": str(self.containers_conf),
        }

    def run(
        self, tool: str, *args: str, capture: bool = True, check: bool = True, timeout: float = 1800
    ) -> subprocess.CompletedProcess[str]:
        """One buildah/podman command on this storage; its output goes to stderr unless captured, and
        a failure raises ImageError if check."""
        command = [tool, *args]
        result = subprocess.run(
            command,
            env={**os.environ, **self.env()},
            stdout=subprocess.PIPE if capture else sys.stderr,
            stderr=subprocess.PIPE if capture else None,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            details = (result.stderr or "").strip()
            raise ImageError(
                f"{' '.join(command)} failed ({result.returncode}){': ' + details if details else ''}"
            )
        return result


def default_storage() -> ContainerStorage:
    return ContainerStorage(cache_root() / "containers")


def install_tools(packages: Sequence[DebianPackage], report: Report = _print) -> None:
    """Install the pinned Debian packages that are missing (as root), or name them."""
    install_debian(tuple(packages), report, purpose="building and running the image")
    missing = [p for p in packages if shutil.which(p.binary) is None]
    if missing:
        names = " ".join(f"{p.package}={p.version}" for p in missing)
        raise ImageError(f"{', '.join(p.binary for p in missing)} not on PATH; install {names}")


def base_key(mmdebstrap_version: str) -> str:
    """What the base is made of: a change of any of it makes a new base."""
    inputs = {
        "suite": BASE_SUITE,
        "sources": BASE_SOURCES,
        "packages": BASE_PACKAGES,
        "dpkg": BASE_DPKG_OPTIONS,
        "mmdebstrap": mmdebstrap_version,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def base_reference(key: str) -> str:
    return f"{BASE_REPOSITORY}:{BASE_SUITE}-py311-{key}"


def _image_exists(storage: ContainerStorage, reference: str) -> bool:
    return storage.run("buildah", "inspect", "--type=image", reference, check=False).returncode == 0


def mmdebstrap_command(target: Path) -> list[str]:
    return [
        "mmdebstrap",
        "--mode=root",
        "--variant=essential",
        "--format=directory",
        # Device nodes are the container runtime's to make.
        "--skip=output/dev",
        f"--include={','.join(BASE_PACKAGES)}",
        *(f"--dpkgopt={option}" for option in BASE_DPKG_OPTIONS),
        "--aptopt=Acquire::Retries=3",
        BASE_SUITE,
        str(target),
        *BASE_SOURCES,
    ]


def build_base(storage: ContainerStorage, report: Report = _print) -> str:
    """The Debian base in storage (made unless one of the same inputs is there); returns its reference."""
    version = subprocess.run(["mmdebstrap", "--version"], capture_output=True, text=True, check=True)
    reference = base_reference(base_key(version.stdout.strip()))
    if _image_exists(storage, reference):
        report(f"  base {reference}: cached")
        return reference
    report(f"  base {reference}: mmdebstrap {BASE_SUITE} with {', '.join(BASE_PACKAGES)}")
    started = time.monotonic()
    container = storage.run("buildah", "from", "scratch").stdout.strip()
    try:
        root = Path(storage.run("buildah", "mount", container).stdout.strip())
        storage.run(*mmdebstrap_command(root), capture=False)
        # As the python image's config: a UTF-8 locale, the interpreter as the command.
        storage.run(
            "buildah",
            "config",
            "--env",
            "LANG=C.UTF-8",
            "--cmd",
            "python3",
            "--label",
            f"org.opencontainers.image.description=Debian {BASE_SUITE}: {' '.join(BASE_PACKAGES)}",
            container,
        )
        storage.run("buildah", "unmount", container)
        storage.run("buildah", "commit", "--rm", "--quiet", container, reference)
    except BaseException:
        storage.run("buildah", "rm", container, check=False)
        raise
    report(f"  base built in {time.monotonic() - started:.0f}s")
    return reference


@dataclass(frozen=True)
class BuiltImage:
    """An image in storage: `tagged` names it, `digest` is its manifest's there. A push writes a manifest
    of its own (its digest is what `push` returns) for the same config, whose digest is `config_digest`
    wherever the image goes."""

    tagged: str
    digest: str
    config_digest: str
    size: int  # bytes, uncompressed

    @property
    def reference(self) -> str:
        return f"{self.tagged}@{self.digest}"


def project_version(context: Path) -> str:
    """pyproject.toml's version: the image's tag and its OCI version label."""
    with (context / "pyproject.toml").open("rb") as file:
        version: str = tomllib.load(file)["project"]["version"]
        return version


def _revision(context: Path) -> str:
    result = subprocess.run(
        ["git", "-C", str(context), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() if result.returncode == 0 else ""


def build_arguments(base: str, version: str, revision: str) -> dict[str, str]:
    return {"PYTHON_IMAGE": base, "VERSION": version, "REVISION": revision}


def bud_command(context: Path, tagged: str, arguments: Mapping[str, str]) -> list[str]:
    return [
        "buildah",
        "bud",
        # Each step's layer is kept, so a rebuild redoes only the steps whose inputs changed.
        "--layers",
        "--format=oci",
        # RUN steps use the host's network: pip reaches PyPI without a container network to set up.
        "--network=host",
        "--isolation=oci",
        "--pull=false",
        # The host's CA bundle, for RUN steps only (bind mounts are not committed): pip then trusts
        # what this machine trusts, e.g. a proxy's CA, and no machine's CA ships in the image.
        *([f"--volume={HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro"] if Path(HOST_CA_BUNDLE).is_file() else []),
        *(f"--build-arg={name}={value}" for name, value in arguments.items()),
        "--file",
        str(context / "Dockerfile"),
        "--tag",
        tagged,
        str(context),
    ]


def inspect(storage: ContainerStorage, reference: str) -> BuiltImage:
    facts = json.loads(storage.run("podman", "image", "inspect", "--format", "json", reference).stdout)[0]
    return BuiltImage(
        tagged=reference,
        digest=facts["Digest"],
        config_digest=f"sha256:{facts['Id']}",
        size=int(facts["Size"]),
    )


def build(context: Path, storage: ContainerStorage | None = None, report: Report = _print) -> BuiltImage:
    """Build context's Dockerfile; returns the image, tagged IMAGE_REPOSITORY:<pyproject version>."""
    if not (context / "Dockerfile").is_file():
        raise ImageError(f"no Dockerfile in {context}: run this from the repository's root")
    install_tools(BUILD_PACKAGES, report)
    if os.geteuid() != 0:
        # mmdebstrap's root mode and buildah's storage as set up here need root; rootless buildah
        # needs subordinate IDs that a fresh machine does not have.
        raise ImageError(
            "building the image needs root (mmdebstrap and buildah run as root here): sudo make image"
        )
    storage = (storage or default_storage()).prepare()
    started = time.monotonic()
    report(f"promsched sandbox image: {context / 'Dockerfile'} -> {storage.root}")
    base = build_base(storage, report)
    version = project_version(context)
    tagged = f"{IMAGE_REPOSITORY}:{version}"
    storage.run(
        *bud_command(context, tagged, build_arguments(base, version, _revision(context))), capture=False
    )
    image = inspect(storage, tagged)
    report(f"image built in {time.monotonic() - started:.0f}s: {image.size / 2**20:.0f} MiB uncompressed")
    return image


def push(storage: ContainerStorage, image: BuiltImage, destination: str, *, tls_verify: bool = True) -> str:
    """Copy the image to destination (a containers-transports name: docker://HOST/REPO:TAG,
    oci-archive:PATH...), its layers as stored (uncompressed); returns the digest of the manifest the
    destination holds."""
    with tempfile.TemporaryDirectory(prefix="promsched-push-") as folder:
        digest_file = Path(folder) / "digest"
        storage.run(
            "buildah",
            "push",
            "--disable-compression",
            f"--tls-verify={str(tls_verify).lower()}",
            "--digestfile",
            str(digest_file),
            image.tagged,
            destination,
        )
        return digest_file.read_text().strip()
