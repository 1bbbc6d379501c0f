"""Sending `Request`s with aiohttp; failures raise `ApiError` carrying the API server's Status."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any, Protocol

import aiohttp
import orjson
from aiohttp.client import DEFAULT_TIMEOUT

from promsched.kube.credentials import Credentials, CredentialsError
from promsched.kube.requests import JSON, Request, get_version, list_objects
from promsched.kube.throttling import Sleep, TokenBucket

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """A non-2xx answer: `status` is the HTTP code, `reason` and `message` come from the API's Status;
    `retry_after`, when the API server asked for the request again later, the seconds to wait first
    (see `retry_delay`)."""

    def __init__(
        self, request: Request, status: int, reason: str, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{request.method} {request.path}: {status} {reason}: {message}")
        self.request = request
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after

    @classmethod
    def from_response(
        cls, request: Request, status: int, text: str, retry_after: float | None = None
    ) -> ApiError:
        try:
            body = orjson.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "Status":
            reason, message = str(body.get("reason", "")), str(body.get("message", ""))
            return cls(request, status, reason, message, retry_after)
        return cls(request, status, "", text[:500], retry_after)


# Bodies go as orjson's compact UTF-8 bytes (aiohttp sends bytes as they are; json's encoder was 2% of
# the busy samples in a 5000-pod burst's profile), and the headers are built once per content type.
_ACCEPT: Mapping[str, str] = {"Accept": JSON}


@functools.cache
def _headers_with(content_type: str) -> Mapping[str, str]:
    return {**_ACCEPT, "Content-Type": content_type}


# client-go's rest client sends a request the API server asked to retry later at most this many times
# more; promsched waits at most this long however long the API server asks (APF asks for 1 s).
MAX_RETRIES = 10
MAX_RETRY_AFTER = 60.0


def retry_delay(status: int, headers: Mapping[str, str]) -> float | None:
    """Seconds to wait before sending a request again, as client-go's `checkWait` reads them: a 429, or
    any 5xx (an API server starting or overloaded), with a `Retry-After` of whole seconds; else None."""
    if status != 429 and status < 500:
        return None
    value = headers.get(aiohttp.hdrs.RETRY_AFTER, "").strip()
    if not value.isdigit():
        return None
    return min(float(value), MAX_RETRY_AFTER)


class RenewalError(CredentialsError, aiohttp.ClientConnectionError):
    """A request's credentials could not be renewed (an exec plugin failed, a token file vanished): a
    connection error to whoever retries those (the scheduler, Kopf), with the reason as its message."""


# The API server closes a connection idle for 90 s (its secure serving's IdleTimeout). Pooled ones are
# closed after 60 s idle, first, so no request goes out on one the server is closing, while a lull
# under a minute costs no new TLS handshakes (aiohttp keeps them 15 s by default; at 50 pods/s a
# fresh client opens ~20, each a handshake on both sides and tens of ms of that request's latency).
KEEPALIVE_SECONDS = 60.0


def open_session(
    credentials: Credentials,
    *,
    base_url: str | None = None,
    timeout: aiohttp.ClientTimeout = DEFAULT_TIMEOUT,
    connections: int = 100,
    **options: Any,
) -> aiohttp.ClientSession:
    """An aiohttp session to the API server of `credentials`: their TLS settings, proxy and
    tls-server-name, and their bearer token on each request. promsched's client and Kopf's watches
    both use one, so they authenticate alike."""
    connector = aiohttp.TCPConnector(
        ssl=credentials.ssl_context(), limit=connections, keepalive_timeout=KEEPALIVE_SECONDS
    )
    return aiohttp.ClientSession(
        base_url,
        connector=connector,
        timeout=timeout,
        proxy=credentials.proxy,
        middlewares=(_authenticating(credentials),),
        **options,
    )


def _authenticating(credentials: Credentials) -> aiohttp.ClientMiddlewareType:
    """Sets the token (renewed when it expires) and, after a 401, renews it and sends the request once
    more, as client-go does for exec plugins and token files."""
    tokens = credentials.token

    async def authenticate(
        request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        if credentials.tls_server_name:
            request.server_hostname = credentials.tls_server_name
        if tokens is None:
            return await handler(request)
        token = tokens.cached()
        if token is None:
            token = await _renewed(tokens.fetch)
        request.headers[aiohttp.hdrs.AUTHORIZATION] = f"Bearer {token}"
        response = await handler(request)
        if response.status != 401 or not tokens.refreshable:
            return response
        response.release()
        token = await _renewed(functools.partial(tokens.refresh, token))
        request.headers[aiohttp.hdrs.AUTHORIZATION] = f"Bearer {token}"
        return await handler(request)

    return authenticate


async def _renewed(renew: Callable[[], str]) -> str:
    # Renewing may run an exec plugin: not on the event loop.
    try:
        return await asyncio.to_thread(renew)
    except CredentialsError as error:
        raise RenewalError(str(error)) from None


class KubeClient:
    """One aiohttp session to one API server. Use as an async context manager.

    With a `limiter`, every request (and every retry of one) first takes a token from it, at the
    request's priority: kube-scheduler's `--kube-api-qps` and `--kube-api-burst`. A request the API
    server answers with 429 (or 5xx) and a Retry-After is sent again after that wait, at most
    `MAX_RETRIES` times; then its ApiError carries the last answer's Status."""

    def __init__(
        self,
        credentials: Credentials,
        timeout: float = 15.0,
        connections: int = 32,
        *,
        limiter: TokenBucket | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.credentials = credentials
        self.limiter = limiter
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._connections = connections
        self._sleep = sleep
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeClient:
        self._session = open_session(
            self.credentials,
            base_url=self.credentials.server,
            timeout=self._timeout,
            connections=self._connections,
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self.limiter is not None:
            await self.limiter.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, request: Request) -> Any:
        retries = 0
        while True:
            if self.limiter is not None:
                await self.limiter.take(request.priority)
            try:
                return await self._send_once(request)
            except ApiError as error:
                if error.retry_after is None or retries >= MAX_RETRIES:
                    raise
                retries += 1
                logger.debug(
                    "%s %s: %d %s, sending it again in %gs (retry %d of %d)",
                    request.method,
                    request.path,
                    error.status,
                    error.reason,
                    error.retry_after,
                    retries,
                    MAX_RETRIES,
                )
                await self._sleep(error.retry_after)

    async def warm(self, connections: int) -> None:
        """Have at least `connections` pooled to the API server, each opened now if need be: as many
        GET /version at once (a request takes an idle pooled connection, else opens one), so that the
        first burst of bindings finds them open rather than paying a TLS handshake on its pods' path.
        kube-scheduler's requests share the one HTTP/2 connection its informers opened."""
        await asyncio.gather(*(self.send(get_version()) for _ in range(connections)))

    async def watch(
        self, request: Request, inactivity_timeout: float
    ) -> AsyncIterator[tuple[str, Mapping[str, Any]]]:
        """A watch's events, (type, object), until the API server ends the stream. An ERROR event raises
        its Status as an ApiError (410: the resourceVersion is too old to resume from); a stream silent
        for `inactivity_timeout` seconds (bookmarks come every minute or so) raises TimeoutError."""
        if self._session is None:
            raise RuntimeError("KubeClient used outside `async with`")
        if self.limiter is not None:
            await self.limiter.take(request.priority)
        timeout = aiohttp.ClientTimeout(sock_connect=self._timeout.total, sock_read=inactivity_timeout)
        async with self._session.request(
            request.method, request.path, headers=_ACCEPT, params=request.params or None, timeout=timeout
        ) as response:
            async for event in watch_events(request, response):
                yield event

    async def _send_once(self, request: Request) -> Any:
        if self._session is None:
            raise RuntimeError("KubeClient used outside `async with`")
        data = None if request.body is None else orjson.dumps(request.body)
        headers = _ACCEPT if data is None else _headers_with(request.content_type)
        async with self._session.request(
            request.method, request.path, data=data, headers=headers, params=request.params or None
        ) as response:
            text = await response.text()
            if response.status == 401:
                tokens = self.credentials.token
                again = ", also once renewed" if tokens is not None and tokens.refreshable else ""
                raise ApiError(
                    request,
                    401,
                    "Unauthorized",
                    f"the API server rejected {self.credentials.describe()}{again}",
                )
            if response.status >= 300:
                delay = retry_delay(response.status, response.headers)
                raise ApiError.from_response(request, response.status, text, delay)
            return orjson.loads(text) if text else None


async def watch_events(
    request: Request, response: aiohttp.ClientResponse
) -> AsyncIterator[tuple[str, Mapping[str, Any]]]:
    """A watch response's events, (type, object); an error response, or an ERROR event, raises its
    Status as an ApiError."""
    if response.status >= 300:
        raise ApiError.from_response(request, response.status, await response.text(), None)
    async for line in stream_lines(response.content):
        event = orjson.loads(line)
        kind, obj = str(event.get("type", "")), event.get("object") or {}
        if kind == "ERROR":
            status = int(obj.get("code") or 500)
            raise ApiError(request, status, str(obj.get("reason", "")), str(obj.get("message", "")))
        yield kind, obj


async def stream_lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """A watch stream's non-empty lines (one JSON event each), however long: aiohttp's own readline
    refuses lines over 128 KiB, and one object's JSON may be longer."""
    pending = b""
    async for chunk in content.iter_any():
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


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
