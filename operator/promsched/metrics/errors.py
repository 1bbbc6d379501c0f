"""Why a Prometheus query failed: one exception type per cause, each naming the query it belongs to."""

from __future__ import annotations

_QUERY_SHOWN = 200  # characters of the query quoted in a message; the full text stays on `.query`


class PrometheusError(Exception):
    """A query that produced no usable result. `message` is the cause alone, for status fields."""

    retryable = False

    def __init__(self, message: str, *, query: str) -> None:
        super().__init__(message)
        self.message = message
        self.query = query

    def __str__(self) -> str:
        shown = self.query if len(self.query) <= _QUERY_SHOWN else self.query[:_QUERY_SHOWN] + "…"
        return f"{self.message} (query: {shown})"


class PrometheusHTTPError(PrometheusError):
    """A non-2xx answer without a Prometheus error payload (a proxy's page, an auth failure)."""

    def __init__(self, status: int, body: str, *, query: str) -> None:
        detail = f": {body}" if body else ""
        super().__init__(f"Prometheus answered HTTP {status}{detail}", query=query)
        self.status = status
        self.retryable = status >= 500


class PrometheusQueryError(PrometheusError):
    """Prometheus's own `"status": "error"` payload; `error` is its text (e.g. a PromQL parse error)."""

    def __init__(self, error_type: str, error: str, *, status: int, query: str) -> None:
        super().__init__(f"Prometheus rejected the query ({error_type}): {error}", query=query)
        self.error_type = error_type
        self.error = error
        self.status = status
        self.retryable = status >= 500


class PrometheusTimeout(PrometheusError):
    """No usable answer within the deadline; `last_error` is why the last retried attempt failed."""

    def __init__(self, seconds: float, *, query: str, last_error: PrometheusError | None = None) -> None:
        after = f" (the last attempt failed: {last_error.message})" if last_error is not None else ""
        super().__init__(f"no answer from Prometheus within {seconds:g}s{after}", query=query)
        self.seconds = seconds
        self.last_error = last_error


class PrometheusUnreachable(PrometheusError):
    """The connection failed (refused, reset, DNS, TLS) on every attempt."""

    retryable = True


class PrometheusCertificateError(PrometheusUnreachable):
    """The server's TLS certificate does not verify; retrying cannot help (set auth.ca)."""

    retryable = False


class PrometheusResponseTooLarge(PrometheusError):
    def __init__(self, limit: int, *, query: str) -> None:
        super().__init__(f"the answer is larger than {limit} bytes; narrow the query", query=query)
        self.limit = limit


class PrometheusBadResponse(PrometheusError):
    """An answer that is not the JSON Prometheus sends, or not an instant vector."""


class PrometheusRedirectRefused(PrometheusError):
    """Redirects are refused: following one could send credentials to another host."""

    def __init__(self, status: int, location: str, *, query: str) -> None:
        super().__init__(
            f"Prometheus answered HTTP {status} redirecting to {location or '(no Location)'}; "
            "redirects are not followed, so set spec.prometheus.url to the final address",
            query=query,
        )
        self.status = status
        self.location = location
