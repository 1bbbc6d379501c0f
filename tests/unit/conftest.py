"""Fixtures for the unit tests: a hand-moved clock and a fake Prometheus (see tests/support)."""

from __future__ import annotations

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from support.clocks import Clock
from support.fake_prometheus import FakePrometheus


@pytest.fixture
async def prometheus(aiohttp_server: AiohttpServer) -> FakePrometheus:
    fake = FakePrometheus()
    app = web.Application()
    # Any path, so redirect targets and wrong paths are recorded too.
    app.router.add_route("*", "/{path:.*}", fake.handle)
    server = await aiohttp_server(app)
    fake.url = str(server.make_url("/"))
    return fake


@pytest.fixture
def clock() -> Clock:
    return Clock(1000.0)
