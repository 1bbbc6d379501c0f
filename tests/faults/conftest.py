"""Fixtures the fault tier shares."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from promsched.sandbox.control_plane.clusters import Sandbox
from support.proxies import StallingProxy


@pytest.fixture
def proxy(sandbox: Sandbox) -> Iterator[StallingProxy]:
    """A relay to the sandbox's API server that a test can stall or cut."""
    relay = StallingProxy(("127.0.0.1", sandbox.state.ports["apiserver"]))
    try:
        yield relay
    finally:
        relay.close()
