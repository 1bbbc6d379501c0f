"""Sending `Request`s with aiohttp; failures raise `ApiError` carrying the API server's Status."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Protocol

import aiohttp

from promsched.kube.credentials import Credentials
from promsched.kube.requests import Request, list_objects


class ApiError(Exception):
    """A non-2xx answer: `status` is the HTTP code, `reason` and `message` come from the API's Status."""

    def __init__(self, request: Request, status: int, reason: str, message: str) -> None:
        super().__init__(f"{request.method} {request.path}: {status} {reason}: {message}")
        self.request = request
        self.status = status
        self.reason = reason
        self.message = message

    @classmethod
    def from_response(cls, request: Request, status: int, text: str) -> ApiError:
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "Status":
            return cls(request, status, str(body.get("reason", "")), str(body.get("message", "")))
        return cls(request, status, "", text[:500])


class KubeClient:
    """One aiohttp session to one API server. Use as an async context manager."""

    def __init__(self, credentials: Credentials, timeout: float = 15.0, connections: int = 32) -> None:
        self.credentials = credentials
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeClient:
        connector = aiohttp.TCPConnector(ssl=self.credentials.ssl_context(), limit=self._connections)
        self._session = aiohttp.ClientSession(
            self.credentials.server, connector=connector, timeout=self._timeout, raise_for_status=False
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, request: Request) -> Any:
        if self._session is None:
            raise RuntimeError("KubeClient used outside `async with`")
        headers = {"Accept": "application/json"}
        token = self.credentials.bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if request.body is not None:
            headers["Content-Type"] = request.content_type
            data = json.dumps(request.body)
        async with self._session.request(
            request.method, request.path, data=data, headers=headers, params=dict(request.params)
        ) as response:
            text = await response.text()
            if response.status >= 300:
                raise ApiError.from_response(request, response.status, text)
            return json.loads(text) if text else None


class SupportsSend(Protocol):
    async def send(self, request: Request) -> Any: ...


async def list_pages(
    sender: SupportsSend, path: str, params: Mapping[str, str] | None = None
) -> AsyncIterator[Mapping[str, Any]]:
    """A list endpoint's pages as the API server answers them, one at a time (so a large cluster is
    never held twice): items, and the metadata whose resourceVersion (the same on every page) says
    which state of the cluster the list shows."""
    token = ""
    while True:
        page = await sender.send(list_objects(path, continue_token=token, params=params))
        yield page
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return


async def list_all(sender: SupportsSend, path: str, params: Mapping[str, str] | None = None) -> list[Any]:
    return [item async for page in list_pages(sender, path, params) for item in page.get("items") or []]
