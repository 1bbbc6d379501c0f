"""Fixtures for the metrics tests: a fake Prometheus (see fake_prometheus.py) and a policy builder."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aiohttp import web
from fake_prometheus import FakePrometheus
from pytest_aiohttp import AiohttpServer

from promsched.api.policies import SchedulingPolicySpec
from support.policies import policy_spec


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
def make_spec() -> Callable[..., SchedulingPolicySpec]:
    return policy_spec
