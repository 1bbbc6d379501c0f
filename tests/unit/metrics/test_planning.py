"""Compiling a policy: plan equality (what restarts a refresher) and the endpoint with its credentials."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from promsched.api.policies import PrometheusSpec
from promsched.metrics import (
    BasicAuth,
    BearerAuth,
    PrometheusCertificateError,
    PrometheusClient,
    SecretValue,
    endpoint_from_policy,
    plan_from_policy,
)
from support.fake_prometheus import FakePrometheus

TOKEN_REF = {"namespace": "monitoring", "name": "prom", "key": "token"}
SECRETS = {
    ("monitoring", "prom", "token"): "s3cret",
    ("monitoring", "prom", "username"): "user",
    ("monitoring", "prom", "password"): "pass",
}


async def read_secret(namespace: str, name: str, key: str) -> str:
    return SECRETS[(namespace, name, key)]


def test_plans_compare_by_settings(make_spec: Callable[..., Any]) -> None:
    plugins = ({"name": "cpu", "weight": 2}, {"name": "memory"})
    plan = plan_from_policy(make_spec(*plugins))
    assert plan == plan_from_policy(make_spec(*plugins))
    assert plan == plan_from_policy(make_spec(*plugins, mode="Shadow", decisionHistory=3))
    assert plan != plan_from_policy(make_spec({"name": "cpu", "weight": 3}, {"name": "memory"}))
    assert plan != plan_from_policy(make_spec(*plugins, staleAfter="5m"))
    assert plan != plan_from_policy(make_spec(*plugins, nodeIdentity={"source": "Label", "label": "node"}))
    assert (plan.refresh_interval_seconds, plan.stale_after_seconds) == (15, 120)


async def test_endpoint_without_auth() -> None:
    endpoint = await endpoint_from_policy(PrometheusSpec(url="http://p:9090", timeout="1m30s"), None)
    assert (endpoint.url, endpoint.timeout_seconds, endpoint.authorization) == ("http://p:9090", 90, None)


async def test_endpoint_bearer_and_basic() -> None:
    bearer_spec = PrometheusSpec.model_validate(
        {
            "url": "http://p",
            "auth": {"bearerToken": {"namespace": "monitoring", "name": "prom", "key": "token"}},
        }
    )
    bearer = await endpoint_from_policy(bearer_spec, read_secret)
    assert bearer.authorization == BearerAuth(SecretValue(read_secret, "monitoring", "prom", "token"))
    assert await bearer.authorization.header() == "Bearer s3cret"
    # Equal specs give equal endpoints, so re-applying a policy does not restart its refresher.
    assert bearer == await endpoint_from_policy(bearer_spec, read_secret)

    basic_spec = PrometheusSpec.model_validate(
        {"url": "http://p", "auth": {"basicAuth": {"namespace": "monitoring", "name": "prom"}}}
    )
    basic = await endpoint_from_policy(basic_spec, read_secret)
    assert isinstance(basic.authorization, BasicAuth)
    assert await basic.authorization.header() == "Basic dXNlcjpwYXNz"


async def test_secrets_need_a_reader() -> None:
    spec = PrometheusSpec.model_validate(
        {
            "url": "http://p",
            "auth": {"bearerToken": {"namespace": "monitoring", "name": "prom", "key": "token"}},
        }
    )
    with pytest.raises(ValueError, match="no Secret reader"):
        await endpoint_from_policy(spec, None)
    insecure = PrometheusSpec.model_validate({"url": "https://p", "auth": {"insecureSkipVerify": True}})
    assert (await endpoint_from_policy(insecure, None)).insecure_skip_verify


async def test_a_broken_ca_is_refused() -> None:
    async def broken(namespace: str, name: str, key: str) -> str:
        return "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"

    spec = PrometheusSpec.model_validate(
        {"url": "https://p", "auth": {"ca": {"namespace": "monitoring", "name": "ca", "key": "ca.crt"}}}
    )
    with pytest.raises(ValueError, match=r"spec\.prometheus\.auth\.ca"):
        await endpoint_from_policy(spec, broken)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    command = [
        "openssl",
        "req",
        "-x509",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=promsched-test",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
    ]
    subprocess.run(
        [*command, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


async def test_https_with_the_ca_from_a_secret(
    aiohttp_server: AiohttpServer, certificate: tuple[Path, Path], prometheus: FakePrometheus
) -> None:
    cert, key = certificate
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    app = web.Application()
    app.router.add_post("/api/v1/query", prometheus.handle)
    server = await aiohttp_server(app, ssl=server_tls)
    url = str(server.make_url("/"))
    assert url.startswith("https://127.0.0.1:")

    async def ca_reader(namespace: str, name: str, key: str) -> str:
        return cert.read_text()

    ca_ref = {"namespace": "monitoring", "name": "ca", "key": "ca.crt"}
    verified = await endpoint_from_policy(
        PrometheusSpec.model_validate({"url": url, "auth": {"ca": ca_ref}}), ca_reader
    )
    async with PrometheusClient(verified) as client:
        await client.query("up")
    assert prometheus.queries() == ["up"]

    unverified = await endpoint_from_policy(PrometheusSpec(url=url), None)
    async with PrometheusClient(unverified) as client:
        with pytest.raises(PrometheusCertificateError, match="certificate"):
            await client.query("up")
    assert len(prometheus.requests) == 1  # no retries: the certificate will not change by itself

    insecure_spec = PrometheusSpec.model_validate({"url": url, "auth": {"insecureSkipVerify": True}})
    async with PrometheusClient(await endpoint_from_policy(insecure_spec, None)) as client:
        await client.query("up")
