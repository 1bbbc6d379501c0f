"""A fake Prometheus HTTP API (served by pytest-aiohttp's test server; see the `prometheus` fixture)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from promsched.metrics import PrometheusEndpoint


@dataclass
class RecordedRequest:
    method: str
    path: str
    form: dict[str, str]
    headers: Mapping[str, str]
    raw: web.Request  # for handlers that stream their answer

    @property
    def query(self) -> str:
        return self.form.get("query", "")


Handler = Callable[[RecordedRequest], Awaitable[web.StreamResponse]]


class FakePrometheus:
    """Answers POST /api/v1/query with `handler` (default: an empty vector) and records requests."""

    def __init__(self) -> None:
        self.url = ""
        self.requests: list[RecordedRequest] = []
        self.handler: Handler = self._empty
        self.in_flight = 0
        self.max_in_flight = 0

    @staticmethod
    async def _empty(request: RecordedRequest) -> web.StreamResponse:
        return FakePrometheus.vector()

    @staticmethod
    def vector(
        *items: tuple[Mapping[str, str], float | str],
        warnings: list[str] | None = None,
        at: float | None = None,
    ) -> web.Response:
        """A successful instant-vector answer; a value may be a string like "NaN" or "+Inf"."""
        timestamp = time.time() if at is None else at
        result = [{"metric": dict(labels), "value": [timestamp, str(value)]} for labels, value in items]
        payload: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": result}}
        if warnings:
            payload["warnings"] = warnings
        return web.json_response(payload)

    @staticmethod
    def prometheus_error(status: int, error_type: str, error: str) -> web.Response:
        return web.json_response({"status": "error", "errorType": error_type, "error": error}, status=status)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        form = {name: str(value) for name, value in (await request.post()).items()}
        recorded = RecordedRequest(request.method, request.path, form, dict(request.headers), request)
        self.requests.append(recorded)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self.handler(recorded)
        finally:
            self.in_flight -= 1

    def queries(self) -> list[str]:
        return [request.query for request in self.requests if request.path == "/api/v1/query"]

    def endpoint(self, **overrides: Any) -> PrometheusEndpoint:
        """An endpoint for this server with test-sized timeouts and backoff."""
        settings: dict[str, Any] = {"url": self.url, "timeout_seconds": 2.0, "retry_backoff_seconds": 0.01}
        settings.update(overrides)
        return PrometheusEndpoint(**settings)
