"""Sending requests: list paging, errors that carry the API's Status, and credentials on the wire
(tokens renewed after a 401, proxies, tls-server-name) against local servers."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from promsched.kube.configuring import from_kubeconfig
from promsched.kube.credentials import Credentials, FixedToken
from promsched.kube.requests import (
    STRATEGIC_MERGE_PATCH,
    Request,
    bind_pod,
    get_version,
    patch_nominated_node,
    watch_objects,
)
from promsched.kube.sending import (
    MAX_RETRIES,
    MAX_RETRY_AFTER,
    ApiError,
    KubeClient,
    RenewalError,
    list_all,
    retry_delay,
)
from promsched.kube.throttling import TokenBucket
from promsched.sandbox.control_plane import certifying
from support.clocks import Clock
from support.kubeconfigs import exec_plugin, exec_user, kubeconfig, runs_of, write_kubeconfig


class PagedApi:
    def __init__(self) -> None:
        self.sent: list[Request] = []

    async def send(self, request: Request) -> Any:
        self.sent.append(request)
        if request.params.get("continue") == "page-2":
            return {"items": [2], "metadata": {}}
        return {"items": [1], "metadata": {"continue": "page-2"}}


async def test_lists_are_read_a_page_at_a_time() -> None:
    api = PagedApi()
    assert await list_all(api, "/api/v1/nodes", {"fieldSelector": "x"}) == [1, 2]
    assert [dict(request.params) for request in api.sent] == [
        {"fieldSelector": "x", "limit": "100"},
        {"fieldSelector": "x", "limit": "100", "continue": "page-2"},
    ]


def test_errors_carry_the_api_status() -> None:
    request = bind_pod("ns", "web", "uid-1", "node-1", {})
    status = '{"kind":"Status","reason":"Conflict","message":"pod web is already assigned to node node-2"}'
    error = ApiError.from_response(request, 409, status)
    assert (error.status, error.reason) == (409, "Conflict")
    assert str(error) == (
        "POST /api/v1/namespaces/ns/pods/web/binding: 409 Conflict: "
        "pod web is already assigned to node node-2"
    )
    plain = ApiError.from_response(request, 502, "<html>bad gateway</html>")
    assert (plain.reason, plain.message) == ("", "<html>bad gateway</html>")


def test_a_binding_names_the_uid_it_was_decided_for() -> None:
    request = bind_pod("ns", "web", "uid-1", "node-1", {"promsched.io/decision": "{}"})
    assert request.body["metadata"]["uid"] == "uid-1"
    assert request.body["metadata"]["annotations"] == {"promsched.io/decision": "{}"}
    assert request.body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-1"}


# ----- credentials on the wire ---------------------------------------------------------------------------


class FakeApiServer:
    """Answers every request with an empty list if its bearer token is accepted, else 401."""

    def __init__(self, accepted: set[str]) -> None:
        self.accepted = accepted
        self.seen: list[web.Request] = []

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(request)
        if request.headers.get("Authorization", "").removeprefix("Bearer ") in self.accepted:
            return web.json_response({"kind": "NamespaceList", "items": []})
        status = {"kind": "Status", "reason": "Unauthorized", "message": "Unauthorized", "code": 401}
        return web.json_response(status, status=401)

    def tokens(self) -> list[str]:
        return [request.headers.get("Authorization", "") for request in self.seen]


LIST_NAMESPACES = Request("GET", "/api/v1/namespaces")


def exec_kubeconfig(tmp_path: Path, server: str) -> tuple[Path, Path, Path]:
    """A kubeconfig whose plugin prints token-N on its Nth run: (kubeconfig, plugin, runs log)."""
    runs = tmp_path / "runs.log"
    plugin = exec_plugin(tmp_path / "plugin", "token-$n", runs=runs)
    config = write_kubeconfig(
        tmp_path / "config",
        kubeconfig(
            clusters={"api": {"server": server}},
            users={"me": exec_user(str(plugin))},
            contexts={"main": {"cluster": "api", "user": "me"}},
            current="main",
        ),
    )
    return config, plugin, runs


async def test_a_401_renews_the_exec_credential_and_sends_the_request_once_more(
    tmp_path: Path, aiohttp_server: AiohttpServer
) -> None:
    api = FakeApiServer({"token-2"})
    server = await aiohttp_server(api.application())
    config, _plugin, runs = exec_kubeconfig(tmp_path, str(server.make_url("")))
    async with KubeClient(from_kubeconfig(config)) as client:
        assert await client.send(LIST_NAMESPACES) == {"kind": "NamespaceList", "items": []}
        assert await client.send(LIST_NAMESPACES) == {"kind": "NamespaceList", "items": []}
    assert api.tokens() == ["Bearer token-1", "Bearer token-2", "Bearer token-2"]
    assert runs_of(runs) == 2


async def test_a_credential_rejected_even_once_renewed_is_an_error_saying_whose(
    tmp_path: Path, aiohttp_server: AiohttpServer
) -> None:
    api = FakeApiServer(set())
    server = await aiohttp_server(api.application())
    config, plugin, _runs = exec_kubeconfig(tmp_path, str(server.make_url("")))
    async with KubeClient(from_kubeconfig(config)) as client:
        with pytest.raises(ApiError) as raised:
            await client.send(LIST_NAMESPACES)
    assert raised.value.status == 401
    assert str(raised.value) == (
        f"GET /api/v1/namespaces: 401 Unauthorized: the API server rejected the token from exec plugin "
        f"{plugin} (context main of {config}), also once renewed"
    )
    fixed = Credentials(
        server=str(server.make_url("")), source="a test", token=FixedToken("abc", "the token of user me")
    )
    api.seen.clear()
    async with KubeClient(fixed) as client:
        with pytest.raises(ApiError, match=r"rejected the token of user me \(a test\)$"):
            await client.send(LIST_NAMESPACES)
    assert api.tokens() == ["Bearer abc"], "a fixed token is not sent twice"


async def test_a_renewal_that_fails_is_a_connection_error_saying_why(
    tmp_path: Path, aiohttp_server: AiohttpServer
) -> None:
    api = FakeApiServer(set())
    server = await aiohttp_server(api.application())
    config, plugin, _runs = exec_kubeconfig(tmp_path, str(server.make_url("")))
    credentials = from_kubeconfig(config)
    # Then the plugin fails, as a cloud CLI does once its login session has expired.
    plugin.write_text("#!/bin/sh\necho 'SSO session expired' >&2\nexit 1\n")
    async with KubeClient(credentials) as client:
        with pytest.raises(RenewalError) as raised:
            await client.send(LIST_NAMESPACES)
    # The scheduler and Kopf retry connection errors; the CLI prints the reason.
    assert isinstance(raised.value, aiohttp.ClientConnectionError)
    assert str(raised.value) == f"exec plugin {plugin} failed: process returned 1. SSO session expired"
    assert api.tokens() == ["Bearer token-1"]


async def test_requests_go_through_the_proxy_url(tmp_path: Path, aiohttp_server: AiohttpServer) -> None:
    proxy = FakeApiServer({"abc"})
    server = await aiohttp_server(proxy.application())
    config = write_kubeconfig(
        tmp_path / "config",
        kubeconfig(
            clusters={"api": {"server": "http://kube.invalid:8080", "proxy-url": str(server.make_url(""))}},
            users={"me": {"token": "abc"}},
            contexts={"main": {"cluster": "api", "user": "me"}},
            current="main",
        ),
    )
    async with KubeClient(from_kubeconfig(config)) as client:
        await client.send(LIST_NAMESPACES)
    [request] = proxy.seen
    assert str(request.url) == "http://kube.invalid:8080/api/v1/namespaces"


async def test_tls_server_name_is_sent_and_verified_instead_of_the_servers_address(
    tmp_path: Path, aiohttp_server: AiohttpServer
) -> None:
    pki = certifying.issue(tmp_path / "pki")
    names: list[str | None] = []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.serving_cert, pki.serving_key)
    context.sni_callback = lambda _socket, name, _context: names.append(name)
    server = await aiohttp_server(FakeApiServer({"abc"}).application(), ssl=context)
    address = f"https://127.0.0.1:{server.port}"

    def credentials(tls_server_name: str) -> Credentials:
        token = FixedToken("abc", "a token")
        return Credentials(address, "a test", str(pki.ca_cert), token=token, tls_server_name=tls_server_name)

    async with KubeClient(credentials("kubernetes.default.svc")) as client:
        await client.send(LIST_NAMESPACES)
    assert names == ["kubernetes.default.svc"]
    async with KubeClient(credentials("not-the-apiserver.example")) as client:
        with pytest.raises(aiohttp.ClientConnectorCertificateError, match=r"not-the-apiserver\.example"):
            await client.send(LIST_NAMESPACES)


# ----- Retry-After ---------------------------------------------------------------------------------------


class ThrottlingApiServer:
    """Refuses with `answers` in turn (status, Retry-After header or None), then answers 200 with an
    empty list; a refusal carries a Status, as the API server's priority and fairness writes it."""

    def __init__(self, *answers: tuple[int, str | None]) -> None:
        self.answers = list(answers)
        self.requests = 0

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self.handle)
        return app

    async def handle(self, _request: web.Request) -> web.Response:
        self.requests += 1
        if not self.answers:
            return web.json_response({"kind": "NamespaceList", "items": []})
        status, retry_after = self.answers.pop(0)
        body = {
            "kind": "Status",
            "reason": "TooManyRequests" if status == 429 else "ServiceUnavailable",
            "message": "Too many requests, please try again later.",
            "code": status,
        }
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        return web.json_response(body, status=status, headers=headers)


class Sleeps:
    """A sleep that records each wait instead of waiting (and moves `clock` on, if given)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)
        if self.clock is not None:
            self.clock.advance(seconds)


async def client_of(
    api: ThrottlingApiServer,
    aiohttp_server: AiohttpServer,
    sleeps: Sleeps,
    limiter: TokenBucket | None = None,
) -> KubeClient:
    server = await aiohttp_server(api.application())
    credentials = Credentials(str(server.make_url("")), "a test", token=FixedToken("t", "a token"))
    return KubeClient(credentials, sleep=sleeps, limiter=limiter)


async def test_a_body_goes_as_compact_json_with_its_content_type(aiohttp_server: AiohttpServer) -> None:
    seen: list[tuple[bytes, str, str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        headers = request.headers
        seen.append((await request.read(), headers["Content-Type"], headers["Accept"], request.query_string))
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handle)
    server = await aiohttp_server(app)
    credentials = Credentials(str(server.make_url("")), "a test", token=FixedToken("t", "a token"))
    async with KubeClient(credentials) as client:
        await client.send(patch_nominated_node("ns", "p", "n1"))
    assert seen == [(b'{"status":{"nominatedNodeName":"n1"}}', STRATEGIC_MERGE_PATCH, "application/json", "")]


async def test_warming_pools_connections_that_a_burst_then_reuses(aiohttp_server: AiohttpServer) -> None:
    peers: list[int] = []
    # Each answer waits until four requests are in: four sent on fewer connections would never get there.
    four_in = asyncio.Barrier(4)

    async def handle(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.append(request.transport.get_extra_info("peername")[1])
        await asyncio.wait_for(four_in.wait(), timeout=5)
        return web.json_response({"major": "1"})

    app = web.Application()
    app.router.add_route("GET", "/version", handle)
    server = await aiohttp_server(app)
    credentials = Credentials(str(server.make_url("")), "a test", token=FixedToken("t", "a token"))
    async with KubeClient(credentials) as client:
        await client.warm(4)
        warmed = set(peers)
        await asyncio.gather(*(client.send(get_version()) for _ in range(4)))

    assert len(warmed) == 4
    assert set(peers) == warmed  # the burst opened none


async def test_a_429_is_sent_again_after_its_retry_after(aiohttp_server: AiohttpServer) -> None:
    api, sleeps = ThrottlingApiServer((429, "3"), (503, "1")), Sleeps()
    async with await client_of(api, aiohttp_server, sleeps) as client:
        assert await client.send(LIST_NAMESPACES) == {"kind": "NamespaceList", "items": []}
    assert sleeps.seconds == [3.0, 1.0]
    assert api.requests == 3


async def test_each_attempt_takes_a_token(clock: Clock, aiohttp_server: AiohttpServer) -> None:
    api, sleeps, waits = ThrottlingApiServer((429, "0"), (429, "0")), Sleeps(), Sleeps(clock)
    limiter = TokenBucket(qps=4, burst=1, clock=clock, sleep=waits)
    async with await client_of(api, aiohttp_server, sleeps, limiter) as client:
        await client.send(LIST_NAMESPACES)
    assert api.requests == 3
    assert waits.seconds == [0.25, 0.25], "the two retries waited for their tokens"


async def test_a_refusal_without_retry_after_is_an_error_at_once(aiohttp_server: AiohttpServer) -> None:
    api, sleeps = ThrottlingApiServer((503, None)), Sleeps()
    async with await client_of(api, aiohttp_server, sleeps) as client:
        with pytest.raises(ApiError) as raised:
            await client.send(LIST_NAMESPACES)
    assert (raised.value.status, raised.value.retry_after) == (503, None)
    assert (sleeps.seconds, api.requests) == ([], 1)


async def test_retries_are_bounded_and_waits_capped_and_the_error_carries_the_status(
    aiohttp_server: AiohttpServer,
) -> None:
    api, sleeps = ThrottlingApiServer(*[(429, "3600")] * (MAX_RETRIES + 2)), Sleeps()
    async with await client_of(api, aiohttp_server, sleeps) as client:
        with pytest.raises(ApiError) as raised:
            await client.send(LIST_NAMESPACES)
    assert sleeps.seconds == [MAX_RETRY_AFTER] * MAX_RETRIES
    assert api.requests == MAX_RETRIES + 1
    assert (raised.value.status, raised.value.reason) == (429, "TooManyRequests")
    assert str(raised.value) == (
        "GET /api/v1/namespaces: 429 TooManyRequests: Too many requests, please try again later."
    )


@pytest.mark.parametrize(
    ("status", "header", "delay"),
    [
        (429, "0", 0.0),
        (429, "7", 7.0),
        (500, "2", 2.0),
        (429, "soon", None),
        (429, "-1", None),
        (409, "5", None),
    ],
)
def test_retry_after_is_read_as_client_go_reads_it(status: int, header: str, delay: float | None) -> None:
    assert retry_delay(status, {"Retry-After": header}) == delay


async def test_a_watch_streams_its_events_however_long_and_raises_its_error_status(
    aiohttp_server: AiohttpServer,
) -> None:
    big = {"metadata": {"name": "big", "resourceVersion": "3"}, "data": "x" * 300_000}  # over 128 KiB
    seen: list[str] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append(request.query_string)
        response = web.StreamResponse()
        await response.prepare(request)
        for event in (
            {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "2"}}},
            {"type": "MODIFIED", "object": big},
            {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}},
        ):
            text = json.dumps(event) + "\n"
            for start in range(0, len(text), 50_000):  # in pieces, as a network delivers it
                await response.write(text[start : start + 50_000].encode())
        return response

    app = web.Application()
    app.router.add_get("/api/v1/pods", handle)
    server = await aiohttp_server(app)
    credentials = Credentials(str(server.make_url("")), "a test", token=FixedToken("t", "a token"))
    events: list[tuple[str, str]] = []

    async def read(client: KubeClient) -> None:
        request = watch_objects("/api/v1/pods", "1", {"fieldSelector": "spec.nodeName!="}, 450)
        async for kind, obj in client.watch(request, inactivity_timeout=30):
            events.append((kind, obj["metadata"]["name"]))

    async with KubeClient(credentials) as client:
        with pytest.raises(ApiError) as raised:
            await read(client)
    assert events == [("ADDED", "a"), ("MODIFIED", "big")]
    assert (raised.value.status, raised.value.reason) == (410, "Expired")
    assert "watch=1" in seen[0]
    assert "resourceVersion=1" in seen[0]
    assert "allowWatchBookmarks=true" in seen[0]
    assert "timeoutSeconds=450" in seen[0]


async def test_a_watch_refused_is_an_error_with_the_apis_status(aiohttp_server: AiohttpServer) -> None:
    async def handle(request: web.Request) -> web.Response:
        status = {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "no watch for you"}
        return web.json_response(status, status=403)

    app = web.Application()
    app.router.add_get("/api/v1/pods", handle)
    server = await aiohttp_server(app)
    credentials = Credentials(str(server.make_url("")), "a test", token=FixedToken("t", "a token"))

    async def read(client: KubeClient) -> None:
        async for _ in client.watch(watch_objects("/api/v1/pods", "", {}, 450), inactivity_timeout=30):
            pass

    async with KubeClient(credentials) as client:
        with pytest.raises(ApiError) as raised:
            await read(client)
    assert (raised.value.status, raised.value.reason) == (403, "Forbidden")
