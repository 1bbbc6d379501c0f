"""PrometheusClient against a fake Prometheus: parsing, errors, retries, limits, auth, redirects."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import logging
import math
import socket
import ssl

import pytest
from aiohttp import web

from promsched.metrics import (
    BasicAuth,
    BearerAuth,
    PrometheusBadResponse,
    PrometheusClient,
    PrometheusEndpoint,
    PrometheusError,
    PrometheusHTTPError,
    PrometheusQueryError,
    PrometheusRedirectRefused,
    PrometheusResponseTooLarge,
    PrometheusTimeout,
    PrometheusUnreachable,
    SecretValue,
)
from support.fake_prometheus import FakePrometheus, RecordedRequest

QUERY = 'up{job="node"}'


async def test_instant_query_is_a_form_post_and_parses_the_vector(prometheus: FakePrometheus) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return prometheus.vector(
            ({"instance": "node-0:9100"}, "12.5"), ({"instance": "node-1:9100"}, 3), at=1700.5
        )

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint(timeout_seconds=3)) as client:
        result = await client.query(QUERY, at=1700.5)

    [request] = prometheus.requests
    assert (request.method, request.path) == ("POST", "/api/v1/query")
    assert request.form == {"query": QUERY, "time": "1700.500", "timeout": "3s"}
    assert request.headers["Accept-Encoding"] == "gzip"
    assert [(dict(s.labels), s.value, s.timestamp) for s in result.series] == [
        ({"instance": "node-0:9100"}, 12.5, 1700.5),
        ({"instance": "node-1:9100"}, 3.0, 1700.5),
    ]
    assert result.non_finite == ()


async def test_time_is_optional(prometheus: FakePrometheus) -> None:
    async with PrometheusClient(prometheus.endpoint()) as client:
        await client.query(QUERY)
    assert "time" not in prometheus.requests[0].form


async def test_a_gzip_answer_is_decompressed(prometheus: FakePrometheus) -> None:
    payload = {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "7"]}]},
    }

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        body = gzip.compress(json.dumps(payload).encode())
        return web.Response(
            body=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint()) as client:
        result = await client.query(QUERY)
    assert [s.value for s in result.series] == [7.0]


async def test_nan_and_inf_are_dropped_and_reported(prometheus: FakePrometheus) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return prometheus.vector(
            ({"n": "a"}, "NaN"), ({"n": "b"}, "+Inf"), ({"n": "c"}, "-Inf"), ({"n": "d"}, "1")
        )

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint()) as client:
        result = await client.query(QUERY)
    assert [s.labels["n"] for s in result.series] == ["d"]
    assert [s.labels["n"] for s in result.non_finite] == ["a", "b", "c"]
    assert math.isnan(result.non_finite[0].value)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"<html>oops</html>", "text/html"),
        (b'{"status": "success", "data": {"resultType": "vector"', "application/json"),
        (b"[1, 2]", "application/json"),
        (b'{"status": "success"}', "application/json"),
        (
            b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}}',
            "application/json",
        ),
        (
            b'{"status": "success", "data": {"resultType": "vector", "result": '
            b'[{"metric": {"instance": 7}, "value": [1, "2"]}]}}',
            "application/json",
        ),
        (
            b'{"status": "success", "data": {"resultType": "vector", "result": '
            b'[{"metric": ["instance"], "value": [1, "2"]}]}}',
            "application/json",
        ),
        (b'{"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}}', "application/json"),
    ],
    ids=[
        "html",
        "truncated-json",
        "not-an-object",
        "no-data",
        "element-without-value",
        "label-value-not-a-string",
        "labels-not-an-object",
        "scalar",
    ],
)
async def test_malformed_answers_are_bad_responses(
    prometheus: FakePrometheus, body: bytes, content_type: str
) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return web.Response(body=body, content_type=content_type)

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint()) as client:
        with pytest.raises(PrometheusBadResponse) as caught:
            await client.query(QUERY)
    assert caught.value.query == QUERY
    assert QUERY in str(caught.value)
    assert len(prometheus.requests) == 1  # not retried: the same answer would come back


async def test_prometheus_error_payload_is_not_retried(prometheus: FakePrometheus) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return prometheus.prometheus_error(400, "bad_data", '1:5: parse error: unexpected "}"')

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint(retries=3)) as client:
        with pytest.raises(PrometheusQueryError) as caught:
            await client.query("up{")
    error = caught.value
    assert (error.status, error.error_type, error.error) == (
        400,
        "bad_data",
        '1:5: parse error: unexpected "}"',
    )
    assert "bad_data" in str(error)
    assert "parse error" in str(error)
    assert "up{" in str(error)
    assert len(prometheus.requests) == 1


async def test_4xx_without_payload_is_an_http_error_not_retried(prometheus: FakePrometheus) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return web.Response(status=401, text="Unauthorized\n")

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint(retries=3)) as client:
        with pytest.raises(PrometheusHTTPError) as caught:
            await client.query(QUERY)
    assert caught.value.status == 401
    assert "HTTP 401: Unauthorized" in str(caught.value)
    assert len(prometheus.requests) == 1


async def test_5xx_is_retried_until_it_succeeds(prometheus: FakePrometheus) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        if len(prometheus.requests) < 3:
            return web.Response(status=502, text="bad gateway")
        return prometheus.vector(({"instance": "a"}, 1))

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint(retries=2)) as client:
        result = await client.query(QUERY)
    assert len(result.series) == 1
    assert len(prometheus.requests) == 3


async def test_5xx_fails_after_the_retries(prometheus: FakePrometheus) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return prometheus.prometheus_error(503, "unavailable", "too many queries")

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint(retries=2)) as client:
        with pytest.raises(PrometheusQueryError) as caught:
            await client.query(QUERY)
    assert caught.value.status == 503
    assert len(prometheus.requests) == 3


async def test_connection_refused_is_retried_then_unreachable() -> None:
    with socket.socket() as sock:  # a port nobody listens on once this socket closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    endpoint_url = f"http://127.0.0.1:{port}"
    async with PrometheusClient(
        PrometheusEndpoint(endpoint_url, retries=1, retry_backoff_seconds=0.01)
    ) as client:
        with pytest.raises(PrometheusUnreachable) as caught:
            await client.query(QUERY)
    assert endpoint_url in str(caught.value)


async def test_slow_answer_times_out(prometheus: FakePrometheus) -> None:
    never = asyncio.Event()

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        await never.wait()
        return prometheus.vector()

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint(timeout_seconds=0.2)) as client:
        with pytest.raises(PrometheusTimeout) as caught:
            await client.query(QUERY)
    assert "0.2s" in str(caught.value)


async def test_oversized_answer_is_refused(prometheus: FakePrometheus) -> None:
    items = [({"instance": f"node-{i}:9100"}, i) for i in range(200)]

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return prometheus.vector(*items)

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint(max_response_bytes=2000)) as client:
        with pytest.raises(PrometheusResponseTooLarge) as caught:
            await client.query(QUERY)
    assert "2000 bytes" in str(caught.value)


async def test_oversized_streamed_answer_is_cut_off(prometheus: FakePrometheus) -> None:
    sent = 0

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        nonlocal sent
        stream = web.StreamResponse(headers={"Content-Type": "application/json"})
        stream.enable_chunked_encoding()
        await stream.prepare(request.raw)
        try:
            for _ in range(1000):  # JSON allows leading whitespace: this could go on for 1 MB
                await stream.write(b" " * 1000)
                sent += 1000
        except ConnectionError:
            pass  # the client hung up, as it should
        return stream

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint(max_response_bytes=5000)) as client:
        with pytest.raises(PrometheusResponseTooLarge):
            await client.query(QUERY)
    assert len(prometheus.requests) == 1


async def test_redirects_are_refused_not_followed(prometheus: FakePrometheus) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        if request.path == "/api/v1/query":
            raise web.HTTPFound("http://elsewhere.invalid/api/v1/query")
        return prometheus.vector()

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint(retries=2)) as client:
        with pytest.raises(PrometheusRedirectRefused) as caught:
            await client.query(QUERY)
    assert caught.value.location == "http://elsewhere.invalid/api/v1/query"
    assert "spec.prometheus.url" in str(caught.value)
    assert [request.path for request in prometheus.requests] == ["/api/v1/query"]


async def test_a_url_path_prefix_is_kept(prometheus: FakePrometheus) -> None:
    async with PrometheusClient(prometheus.endpoint(url=prometheus.url + "prometheus/")) as client:
        await client.query(QUERY)
    assert prometheus.requests[0].path == "/prometheus/api/v1/query"


async def test_warnings_are_logged_once_per_query(
    prometheus: FakePrometheus, caplog: pytest.LogCaptureFixture
) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return prometheus.vector(({"a": "b"}, 1), warnings=["results truncated"])

    prometheus.handler = answer
    caplog.set_level(logging.WARNING, logger="promsched.metrics.querying")
    async with PrometheusClient(prometheus.endpoint()) as client:
        for _ in range(3):
            result = await client.query(QUERY)
        await client.query("other_query")
    assert result.warnings == ("results truncated",)
    warned = [record.getMessage() for record in caplog.records if "results truncated" in record.getMessage()]
    assert len(warned) == 2
    assert QUERY in warned[0]
    assert "other_query" in warned[1]


async def test_concurrent_queries_are_bounded(prometheus: FakePrometheus) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        await asyncio.sleep(0.05)  # the fake server is slow, so queries overlap
        return prometheus.vector()

    prometheus.handler = answer
    async with PrometheusClient(prometheus.endpoint(max_concurrent_queries=2)) as client:
        await asyncio.gather(*(client.query(f"q{i}") for i in range(6)))
    assert len(prometheus.requests) == 6
    assert prometheus.max_in_flight == 2


async def test_bearer_token_is_read_for_every_query(prometheus: FakePrometheus) -> None:
    tokens = iter(["first-token\n", "rotated-token"])
    reads: list[tuple[str, str, str]] = []

    async def read_secret(namespace: str, name: str, key: str) -> str:
        reads.append((namespace, name, key))
        return next(tokens)

    authorization = BearerAuth(SecretValue(read_secret, "monitoring", "prom-token", "token"))
    async with PrometheusClient(prometheus.endpoint(authorization=authorization)) as client:
        await client.query(QUERY)
        await client.query(QUERY)
    assert [r.headers["Authorization"] for r in prometheus.requests] == [
        "Bearer first-token",
        "Bearer rotated-token",
    ]
    assert reads == [("monitoring", "prom-token", "token")] * 2


async def test_basic_auth_header(prometheus: FakePrometheus) -> None:
    secrets = {"username": "scheduler", "password": "p@ss:word"}

    async def read_secret(namespace: str, name: str, key: str) -> str:
        return secrets[key]

    authorization = BasicAuth(
        username=SecretValue(read_secret, "ns", "basic", "username"),
        password=SecretValue(read_secret, "ns", "basic", "password"),
    )
    async with PrometheusClient(prometheus.endpoint(authorization=authorization)) as client:
        await client.query(QUERY)
    expected = "Basic " + base64.b64encode(b"scheduler:p@ss:word").decode()
    assert prometheus.requests[0].headers["Authorization"] == expected


async def test_an_unreadable_secret_fails_the_query(prometheus: FakePrometheus) -> None:
    async def read_secret(namespace: str, name: str, key: str) -> str:
        raise KeyError(f"secret {namespace}/{name} has no key {key}")

    authorization = BearerAuth(SecretValue(read_secret, "ns", "missing", "token"))
    async with PrometheusClient(prometheus.endpoint(authorization=authorization)) as client:
        with pytest.raises(PrometheusError, match="cannot read the Prometheus credentials"):
            await client.query(QUERY)
    assert prometheus.requests == []


def test_tls_settings() -> None:
    assert PrometheusEndpoint("https://p:9090").ssl_context() is None  # aiohttp's verified default
    insecure = PrometheusEndpoint("https://p:9090", insecure_skip_verify=True).ssl_context()
    assert insecure is not None
    assert (insecure.check_hostname, insecure.verify_mode) == (False, ssl.CERT_NONE)
    with pytest.raises(ssl.SSLError):
        PrometheusEndpoint(
            "https://p:9090", ca_pem="-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"
        ).ssl_context()


async def test_a_deadline_during_retries_names_the_last_failure(prometheus: FakePrometheus) -> None:
    async def answer(request: RecordedRequest) -> web.StreamResponse:
        return web.Response(status=502, text="bad gateway")

    prometheus.handler = answer
    endpoint = prometheus.endpoint(timeout_seconds=0.2, retries=5, retry_backoff_seconds=1.0)
    async with PrometheusClient(endpoint) as client:
        with pytest.raises(PrometheusTimeout) as caught:
            await client.query(QUERY)
    assert isinstance(caught.value.last_error, PrometheusHTTPError)
    assert "the last attempt failed: Prometheus answered HTTP 502: bad gateway" in str(caught.value)
    assert len(prometheus.requests) == 1
