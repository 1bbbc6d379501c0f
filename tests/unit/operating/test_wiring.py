"""The Kopf wiring's own parts that run without a cluster."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import ssl

import kopf
import pytest

from promsched.operating.wiring import TLS_READ_BUFFER, NoDiffBase, limit_tls_read_buffers


def test_no_diff_base_keeps_no_state_of_pods() -> None:
    storage = NoDiffBase()
    body = kopf.Body({"metadata": {"name": "web", "uid": "u"}, "spec": {"containers": [{"name": "c"}]}})
    assert storage.fetch(body=body) is None
    essence = storage.build(body=body)
    assert essence == {}
    essence["spec"] = {}  # what Kopf may do with one essence leaves the next one alone
    assert storage.build(body=body) == {}


async def test_tls_connections_get_small_read_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", 256 * 1024)  # restored afterwards
    limit_tls_read_buffers()
    loop = asyncio.get_running_loop()
    protocol = asyncio.sslproto.SSLProtocol(
        loop, asyncio.Protocol(), ssl.create_default_context(), loop.create_future(), server_hostname="x"
    )
    assert len(protocol._ssl_buffer) == TLS_READ_BUFFER
