"""Sending requests: list paging, errors that carry the API's Status, and credentials on the wire
(tokens renewed after a 401, proxies, tls-server-name) against local servers."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from promsched.kube.configuring import from_kubeconfig
from promsched.kube.credentials import Credentials, FixedToken
from promsched.kube.requests import Request, bind_pod
from promsched.kube.sending import ApiError, KubeClient, RenewalError, list_all
from promsched.sandbox import certifying
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
