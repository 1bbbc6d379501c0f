"""The e2e tier: the promsched operator running against the sandbox (fixtures in tests/conftest.py), and
the sandbox's own kube-scheduler for the differential tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from promsched.sandbox.control_plane.clusters import Sandbox
from support.differential import running_kube_scheduler


@pytest.fixture(scope="module")
def kube_scheduler(sandbox: Sandbox) -> Iterator[str]:
    """The sandbox's own kube-scheduler, serving a scheduler name of its own; yields that name."""
    with running_kube_scheduler(sandbox) as name:
        yield name
