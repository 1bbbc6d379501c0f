"""A container registry on 127.0.0.1 for one test run: Debian's docker-registry (the CNCF distribution
registry), with its own configuration and storage in a temporary folder, stopped afterwards."""

from __future__ import annotations

import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from support.polling import eventually


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def local_registry(folder: Path) -> Iterator[str]:
    """Serve a registry over plain HTTP on a free port of 127.0.0.1; yields its host:port."""
    address = f"127.0.0.1:{free_port()}"
    config = folder / "registry.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "version": 0.1,
                "log": {"level": "warn"},
                "storage": {"filesystem": {"rootdirectory": str(folder / "storage")}},
                "http": {"addr": address},
            }
        )
    )
    log = (folder / "registry.log").open("w")
    process = subprocess.Popen(
        ["docker-registry", "serve", str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        # /v2/ answers 200 once the registry serves (no authentication configured).
        eventually(
            lambda: process.poll() is None and _answers(f"http://{address}/v2/"),
            bool,
            timeout=30,
            what=f"the registry on {address} (log: {folder / 'registry.log'})",
        )
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
