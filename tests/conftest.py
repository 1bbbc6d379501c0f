"""Fixtures shared by every tier. The integration tiers share one sandbox per test run.

Set PROMSCHED_SANDBOX_DIR to a folder holding a running sandbox to reuse it across runs (it is then
left running); otherwise the run starts its own in a temporary folder and stops it at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from promsched.sandbox import launching
from promsched.sandbox.clusters import Sandbox

FIXTURES = Path(__file__).parent / "fixtures"
SANDBOX_NODES = 6


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    reuse = os.environ.get("PROMSCHED_SANDBOX_DIR")
    if reuse:
        yield Sandbox.load(Path(reuse))
        return
    directory = tmp_path_factory.mktemp("sandbox")
    started = launching.up(directory, nodes=SANDBOX_NODES, profiles_file=FIXTURES / "profiles.yaml")
    try:
        yield started
    finally:
        launching.down(directory)
