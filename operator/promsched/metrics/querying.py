"""Instant queries against one Prometheus endpoint over a shared aiohttp session.

Each query is bounded (a semaphore on concurrency, a deadline covering retries, a cap on the answer's
size), retried with exponential backoff on 5xx answers and connection failures (never on 4xx: the same
query would fail the same way), and fails with a `PrometheusError` subclass naming the query.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

import promsched
from promsched.metrics import promql
from promsched.metrics.errors import (
    PrometheusBadResponse,
    PrometheusCertificateError,
    PrometheusError,
    PrometheusHTTPError,
    PrometheusQueryError,
    PrometheusRedirectRefused,
    PrometheusResponseTooLarge,
    PrometheusTimeout,
    PrometheusUnreachable,
)
from promsched.metrics.offloading import off_loop, paced, pause
from promsched.metrics.samples import QueryResult, Series

logger = logging.getLogger(__name__)

SecretReader = Callable[[str, str, str], Awaitable[str]]
"""Reads a Secret's key: ``await read_secret(namespace, name, key)``."""

_CHUNK_BYTES = 64 * 1024
_BODY_SHOWN = 300  # characters of a non-JSON error body quoted in the error
_WARNED_QUERIES_KEPT = 1024


@dataclass(frozen=True)
class SecretValue:
    """A value read from a Secret each time it is needed, so a rotated Secret takes effect at once.

    `read_secret` runs before every query: make it a cache or index lookup, not an API call.
    """

    read_secret: SecretReader
    namespace: str
    name: str
    key: str

    async def __call__(self) -> str:
        return await self.read_secret(self.namespace, self.name, self.key)


@dataclass(frozen=True)
class BearerAuth:
    token: Callable[[], Awaitable[str]]

    async def header(self) -> str:
        return f"Bearer {(await self.token()).strip()}"


@dataclass(frozen=True)
class BasicAuth:
    username: Callable[[], Awaitable[str]]
    password: Callable[[], Awaitable[str]]

    async def header(self) -> str:
        credentials = f"{await self.username()}:{await self.password()}"
        return "Basic " + base64.b64encode(credentials.encode()).decode("ascii")


SecretText = Callable[[], Awaitable[str]]


@dataclass(frozen=True)
class PrometheusEndpoint:
    """Where and how to query; equal endpoints can share a client (the refresher compares them).

    `headers` are sent with every request, each value read (a `SecretValue`) before each one.
    """

    url: str
    timeout_seconds: float = 5.0
    authorization: BearerAuth | BasicAuth | None = None
    headers: tuple[tuple[str, SecretText], ...] = ()
    ca_pem: str | None = None
    insecure_skip_verify: bool = False
    max_concurrent_queries: int = 8
    max_response_bytes: int = 32 * 1024 * 1024
    retries: int = 2
    retry_backoff_seconds: float = 0.2

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS settings, or None for the defaults (system CAs, verified). Raises on a bad CA PEM."""
        if self.ca_pem is None and not self.insecure_skip_verify:
            return None
        context = ssl.create_default_context(cadata=self.ca_pem)
        if self.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


class PrometheusClient:
    """Queries one endpoint. Create it inside the event loop; `close()` (or ``async with``) when done."""

    def __init__(self, endpoint: PrometheusEndpoint) -> None:
        self.endpoint = endpoint
        self._query_url = endpoint.url.rstrip("/") + "/api/v1/query"
        self._ssl = endpoint.ssl_context()
        self._semaphore = asyncio.Semaphore(endpoint.max_concurrent_queries)
        self._session: aiohttp.ClientSession | None = None
        self._warned_queries: set[str] = set()

    async def __aenter__(self) -> PrometheusClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def query(self, query: str, *, at: float | None = None) -> QueryResult:
        """The instant vector `query` gives (at unix time `at`, default now).

        The deadline (`timeout_seconds`) starts once a concurrency slot is free and covers all retries.
        """
        failed_attempts: list[PrometheusError] = []
        async with self._semaphore:
            try:
                async with asyncio.timeout(self.endpoint.timeout_seconds):
                    result = await self._query_with_retries(query, at, failed_attempts)
            except TimeoutError:
                last = failed_attempts[-1] if failed_attempts else None
                raise PrometheusTimeout(self.endpoint.timeout_seconds, query=query, last_error=last) from None
        if result.warnings:
            self._warn_once(result)
        return result

    async def _query_with_retries(
        self, query: str, at: float | None, failed_attempts: list[PrometheusError]
    ) -> QueryResult:
        while True:
            try:
                return await self._post_query(query, at)
            except PrometheusError as error:
                if not error.retryable or len(failed_attempts) >= self.endpoint.retries:
                    raise
                delay = self.endpoint.retry_backoff_seconds * 2 ** len(failed_attempts)
                failed_attempts.append(error)
                logger.debug("Retrying in %.2fs after: %s", delay, error)
                await asyncio.sleep(delay)

    async def _post_query(self, query: str, at: float | None) -> QueryResult:
        form = {"query": query, "timeout": promql.duration(self.endpoint.timeout_seconds)}
        if at is not None:
            form["time"] = f"{at:.3f}"
        headers = await self.request_headers(query)
        try:
            async with self._get_session().post(
                self._query_url, data=form, headers=headers, allow_redirects=False
            ) as response:
                if 300 <= response.status < 400:
                    location = response.headers.get("Location", "")
                    raise PrometheusRedirectRefused(response.status, location, query=query)
                body = await self._read_capped(response, query)
                status = response.status
        except aiohttp.ClientConnectorCertificateError as error:
            message = f"the TLS certificate of {self.endpoint.url} does not verify: {error.certificate_error}"
            raise PrometheusCertificateError(message, query=query) from error
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as error:
            message = f"cannot reach Prometheus at {self.endpoint.url}: {error or type(error).__name__}"
            raise PrometheusUnreachable(message, query=query) from error
        # Off the event loop: one node_exporter answer of a 5000-node cluster (~0.6 MB) takes tens of ms
        # to decode and parse, which would hold up every pod waiting to be scheduled.
        return await off_loop(_vector, status, body, query)

    async def request_headers(self, query: str = "") -> dict[str, str]:
        """The headers of a request: the endpoint's own (from Secrets) and its credentials. A missing or
        unreadable Secret is the request's failure, a PrometheusError naming what could not be read."""
        headers = {"Accept": "application/json", "Accept-Encoding": "gzip"}
        for name, value in self.endpoint.headers:
            try:
                headers[name] = (await value()).strip()
            except Exception as error:
                raise PrometheusError(f"cannot read header {name}'s value: {error}", query=query) from error
        if self.endpoint.authorization is not None:
            try:
                headers["Authorization"] = await self.endpoint.authorization.header()
            except Exception as error:
                raise PrometheusError(
                    f"cannot read the Prometheus credentials: {error}", query=query
                ) from error
        return headers

    async def get_json(self, path: str) -> dict[str, Any] | None:
        """The JSON object at `path` (e.g. /api/v1/status/buildinfo) under the endpoint's deadline, or
        None when the server has no such page (4xx) or answers something else; raises PrometheusError
        when it cannot be reached."""
        url = self.endpoint.url.rstrip("/") + path
        headers = await self.request_headers(path)
        try:
            async with asyncio.timeout(self.endpoint.timeout_seconds):
                async with self._get_session().get(url, headers=headers, allow_redirects=False) as response:
                    body = await self._read_capped(response, path)
                    status = response.status
        except TimeoutError:
            raise PrometheusTimeout(self.endpoint.timeout_seconds, query=path) from None
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as error:
            message = f"cannot reach Prometheus at {self.endpoint.url}: {error or type(error).__name__}"
            raise PrometheusUnreachable(message, query=path) from error
        if status != 200:
            return None
        try:
            payload = orjson.loads(body)
        except ValueError:
            return None
        return payload if isinstance(payload, dict) else None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self.endpoint.max_concurrent_queries, ssl=self._ssl or True
                ),
                # The deadline in query() governs; aiohttp's default 5-minute total would only compete.
                timeout=aiohttp.ClientTimeout(total=None),
                headers={"User-Agent": f"promsched/{promsched.__version__}"},
            )
        return self._session

    async def _read_capped(self, response: aiohttp.ClientResponse, query: str) -> bytes:
        limit = self.endpoint.max_response_bytes
        if response.content_length is not None and response.content_length > limit:
            raise PrometheusResponseTooLarge(limit, query=query)
        chunks: list[bytes] = []
        size = 0
        # Decompressed chunks: the cap bounds memory, whatever the compression ratio.
        async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
            size += len(chunk)
            if size > limit:
                raise PrometheusResponseTooLarge(limit, query=query)
            chunks.append(chunk)
        return b"".join(chunks)

    def _warn_once(self, result: QueryResult) -> None:
        # A refresh repeats the same query text; one log line per text is enough.
        if result.query in self._warned_queries:
            return
        if len(self._warned_queries) >= _WARNED_QUERIES_KEPT:
            self._warned_queries.clear()
        self._warned_queries.add(result.query)
        logger.warning("Prometheus warns about query %s: %s", result.query, "; ".join(result.warnings))


def _excerpt(body: bytes) -> str:
    text = " ".join(body.decode("utf-8", "replace").split())
    return text if len(text) <= _BODY_SHOWN else text[:_BODY_SHOWN] + "…"


def _vector(status: int, body: bytes, query: str) -> QueryResult:
    pause()
    return _parse_vector(_decode(status, body, query), query)


def _decode(status: int, body: bytes, query: str) -> dict[str, Any]:
    try:
        payload = orjson.loads(body)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        if status >= 300:
            raise PrometheusHTTPError(status, _excerpt(body), query=query)
        raise PrometheusBadResponse(f"the answer is not a JSON object: {_excerpt(body)}", query=query)
    if payload.get("status") == "error" or status >= 300:
        if "error" in payload or "errorType" in payload:
            error_type = str(payload.get("errorType", "unknown"))
            raise PrometheusQueryError(error_type, str(payload.get("error", "")), status=status, query=query)
        raise PrometheusHTTPError(status, _excerpt(body), query=query)
    return payload


def _parse_vector(payload: dict[str, Any], query: str) -> QueryResult:
    data = payload.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise PrometheusBadResponse("the answer has no data.result list", query=query)
    if data.get("resultType") != "vector":
        raise PrometheusBadResponse(
            f"the query gives a {data.get('resultType')}, not an instant vector (one series per node)",
            query=query,
        )
    finite: list[Series] = []
    non_finite: list[Series] = []
    for item in paced(data["result"]):
        # The decoded label set is kept as it is (JSON keys are strings): its values checked, not copied.
        try:
            timestamp, text = item["value"]
            labels = item["metric"]
            for label_value in labels.values():
                if type(label_value) is not str:
                    raise TypeError
            series = Series(labels, float(text), float(timestamp))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise PrometheusBadResponse(f"malformed vector element: {str(item)[:200]}", query=query) from None
        (finite if math.isfinite(series.value) else non_finite).append(series)
    # Prometheus' warnings and (3.x) infos, and a partial answer (VictoriaMetrics cluster's isPartial;
    # Thanos says so in its warnings): each a reason not to trust the values as complete.
    warnings = [*(payload.get("warnings") or []), *(payload.get("infos") or [])]
    if payload.get("isPartial") is True:
        warnings.append("partial response: some of the backend's storage nodes did not answer")
    return QueryResult(
        query=query,
        series=tuple(finite),
        non_finite=tuple(non_finite),
        warnings=tuple(str(warning) for warning in warnings),
    )
