"""Backends other than Prometheus: headers from Secrets (Mimir's X-Scope-OrgID), warnings and partial
answers kept with the result, and the engine named from its build info."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from pydantic import ValidationError

from promsched.api.crds import render_crd
from promsched.api.policies import PrometheusSpec
from promsched.metrics import (
    NodeDirectory,
    PrometheusClient,
    PrometheusError,
    SecretValue,
    plan_from_policy,
    preflight,
)
from promsched.metrics.engines import describe, engine_of
from promsched.metrics.planning import endpoint_from_policy
from support.fake_prometheus import FakePrometheus, RecordedRequest

QUERY = "up"
TENANT = {"name": "X-Scope-OrgID", "valueFrom": {"namespace": "monitoring", "name": "mimir", "key": "tenant"}}
PROMETHEUS_BUILD = {
    "status": "success",
    "data": {"version": "2.53.0", "revision": "4c35b9250afefede41c5f5acd76191f90f625898", "branch": "HEAD"},
}


async def test_headers_are_read_from_their_secrets_before_every_query(prometheus: FakePrometheus) -> None:
    tenants = iter(["team-a\n", "team-b"])

    async def read_secret(namespace: str, name: str, key: str) -> str:
        assert (namespace, name, key) == ("monitoring", "mimir", "tenant")
        return next(tenants)

    spec = PrometheusSpec.model_validate({"url": prometheus.url, "headers": [TENANT]})
    endpoint = await endpoint_from_policy(spec, read_secret)
    assert endpoint.headers == (("X-Scope-OrgID", SecretValue(read_secret, "monitoring", "mimir", "tenant")),)
    async with PrometheusClient(endpoint) as client:
        await client.query(QUERY)
        await client.query(QUERY)
    assert [request.headers["X-Scope-OrgID"] for request in prometheus.requests] == ["team-a", "team-b"]


async def test_an_unreadable_header_secret_fails_the_query_naming_the_header(
    prometheus: FakePrometheus,
) -> None:
    async def read_secret(namespace: str, name: str, key: str) -> str:
        raise ValueError(f"Secret {namespace}/{name} has no key {key!r}")

    spec = PrometheusSpec.model_validate({"url": prometheus.url, "headers": [TENANT]})
    async with PrometheusClient(await endpoint_from_policy(spec, read_secret)) as client:
        with pytest.raises(
            PrometheusError, match="cannot read header X-Scope-OrgID's value: Secret monitoring"
        ):
            await client.query(QUERY)
    assert prometheus.requests == []


async def test_headers_name_secrets_so_they_need_a_reader() -> None:
    spec = PrometheusSpec.model_validate({"url": "http://p", "headers": [TENANT]})
    with pytest.raises(ValueError, match="no Secret reader"):
        await endpoint_from_policy(spec, None)


@pytest.mark.parametrize(
    ("headers", "auth", "message"),
    [
        (["X-Scope-OrgID", "x-scope-orgid"], None, "x-scope-orgid named more than once"),
        (["Content-Type"], None, "content-type is set by promsched's HTTP client itself"),
        (["Host"], None, "host is set by promsched's HTTP client itself"),
        (["Authorization"], {"bearerToken": {"namespace": "m", "name": "t", "key": "k"}}, "set one"),
        (["X Scope"], None, "String should match pattern"),
    ],
)
def test_headers_promsched_sets_or_that_repeat_are_refused(
    headers: list[str], auth: dict[str, Any] | None, message: str
) -> None:
    document: dict[str, Any] = {
        "url": "http://p",
        "headers": [{**TENANT, "name": name} for name in headers],
    }
    if auth is not None:
        document["auth"] = auth
    with pytest.raises(ValidationError, match=message):
        PrometheusSpec.model_validate(document)


def test_an_authorization_header_of_its_own_is_allowed_without_auth_credentials() -> None:
    spec = PrometheusSpec.model_validate(
        {"url": "http://p", "headers": [{**TENANT, "name": "Authorization"}]}
    )
    assert spec.headers is not None
    assert [header.name for header in spec.headers] == ["Authorization"]


def test_the_crd_refuses_what_the_model_refuses_about_headers() -> None:
    schema = render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    prometheus = schema["properties"]["spec"]["properties"]["prometheus"]
    rules = {rule["message"]: rule for rule in prometheus["x-kubernetes-validations"]}
    assert [message.split(": ")[1][:30] for message in rules if "headers" in message] == [
        "each name at most once (names ",
        "Accept, Accept-Encoding, Conne",
        "Authorization is set by auth.b",
    ]
    assert all(rules[message]["fieldPath"] == ".headers" for message in rules if "headers" in message)
    assert prometheus["properties"]["headers"]["maxItems"] == 8


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            {"infos": ["PromQL info: metric might not be a counter"]},
            ("PromQL info: metric might not be a counter",),
        ),
        ({"isPartial": True}, ("partial response: some of the backend's storage nodes did not answer",)),
        (
            {"isPartial": False, "warnings": ["No StoreAPIs matched for this query"]},
            ("No StoreAPIs matched for this query",),
        ),
    ],
)
async def test_infos_and_partial_answers_are_warnings(
    prometheus: FakePrometheus, extra: dict[str, Any], expected: tuple[str, ...]
) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return web.json_response(
            {"status": "success", "data": {"resultType": "vector", "result": []}, **extra}
        )

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint()) as client:
        assert (await client.query(QUERY)).warnings == expected


@pytest.mark.parametrize(
    ("build_info", "victoria_config", "engine"),
    [
        (PROMETHEUS_BUILD, None, "Prometheus 2.53.0 (revision 4c35b9250afe)"),
        # VictoriaMetrics' build info is a fixed Prometheus version for Grafana; its vmui config says which.
        (
            {"status": "success", "data": {"version": "2.24.0"}},
            {"version": "v1.151.0"},
            "VictoriaMetrics v1.151.0",
        ),
        ({"status": "success", "data": {"version": "2.24.0"}}, None, "Prometheus 2.24.0"),
        (
            {"status": "success", "data": {"application": "Grafana Mimir", "version": "2.14.0"}},
            None,
            "Grafana Mimir 2.14.0",
        ),
        ({"status": "success", "data": {"version": "0.39.2", "revision": "abc"}}, None, "Thanos 0.39.2"),
        (None, None, None),
        ({"status": "success", "data": {"resultType": "vector", "result": []}}, None, None),
    ],
)
def test_the_engine_is_named_from_its_build_info(
    build_info: dict[str, Any] | None, victoria_config: dict[str, Any] | None, engine: str | None
) -> None:
    assert describe(build_info, victoria_config) == engine


async def test_the_preflight_names_the_engine_and_each_querys_warnings(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        if request.path == "/api/v1/status/buildinfo":
            return web.json_response(PROMETHEUS_BUILD)
        if request.path != "/api/v1/query":
            return web.Response(status=404)
        return prometheus.vector(({"instance": "node-0:9100"}, 5), warnings=["results truncated"])

    prometheus.handler = answer
    plan = plan_from_policy(make_spec({"name": "cpu"}, nodeIdentity={"source": "Label", "label": "instance"}))
    async with PrometheusClient(prometheus.endpoint()) as client:
        report = await preflight(plan, client, NodeDirectory.of(["node-0"]))
    assert report.engine == "Prometheus 2.53.0 (revision 4c35b9250afe)"
    assert [(query.plugin, query.ok, query.warnings) for query in report.queries] == [
        ("cpu", True, ["results truncated"])
    ]
    # The version is asked once; a revision says it is no VictoriaMetrics, whose page is not asked for.
    assert [request.path for request in prometheus.requests if request.method == "GET"] == [
        "/api/v1/status/buildinfo"
    ]


async def test_an_engine_without_build_info_is_left_unnamed(prometheus: FakePrometheus) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return web.Response(status=404, text="404 page not found")

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint()) as client:
        assert await engine_of(client) is None
