"""Fixtures for the metrics tests: a fake Prometheus (see fake_prometheus.py) and policy builders."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from aiohttp import web
from fake_prometheus import FakePrometheus
from pytest_aiohttp import AiohttpServer

from promsched.api.policies import SchedulingPolicySpec, parse_spec


@pytest.fixture
async def prometheus(aiohttp_server: AiohttpServer) -> FakePrometheus:
    fake = FakePrometheus()
    app = web.Application()
    # Any path, so redirect targets and wrong paths are recorded too.
    app.router.add_route("*", "/{path:.*}", fake.handle)
    server = await aiohttp_server(app)
    fake.url = str(server.make_url("/"))
    return fake


def policy_spec(*plugins: Mapping[str, Any], **spec: Any) -> SchedulingPolicySpec:
    """A valid spec with these plugins; `spec` overrides camelCase top-level fields."""
    document: dict[str, Any] = {
        "schedulerName": "promsched",
        "prometheus": {"url": "http://prometheus.invalid:9090"},
        "plugins": list(plugins) or [{"name": "cpu"}],
    }
    document.update(spec)
    return parse_spec(document)


@pytest.fixture
def make_spec() -> Callable[..., SchedulingPolicySpec]:
    return policy_spec
