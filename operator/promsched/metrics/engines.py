"""Which engine answers the Prometheus HTTP API, from its build info, for the preflight to show.

Prometheus, Thanos and Grafana Mimir answer `/api/v1/status/buildinfo` with their own version (Mimir
adds `application`). VictoriaMetrics answers it with a fixed Prometheus version for Grafana's sake,
`{"version": "2.24.0"}` and nothing else, so an answer without a `revision` is checked against
VictoriaMetrics' own `/vmui/config.json`, which carries its real version.
"""

from __future__ import annotations

from typing import Any

from promsched.metrics.errors import PrometheusError
from promsched.metrics.querying import PrometheusClient

BUILD_INFO_PATH = "/api/v1/status/buildinfo"
VICTORIAMETRICS_CONFIG_PATH = "/vmui/config.json"
_SHOWN_CHARS = 128


def _text(value: Any) -> str:
    return str(value)[:_SHOWN_CHARS]


def describe(build_info: dict[str, Any] | None, victoria_config: dict[str, Any] | None) -> str | None:
    """The engine in words, from the answers to the two pages (None where a page had none); None when
    neither says."""
    data = build_info.get("data") if build_info is not None else None
    if isinstance(victoria_config, dict) and victoria_config.get("version"):
        return f"VictoriaMetrics {_text(victoria_config['version'])}"
    if not isinstance(data, dict) or not data.get("version"):
        return None
    version = _text(data["version"])
    if data.get("application"):
        return f"{_text(data['application'])} {version}"
    if version.startswith("0."):  # Thanos is at 0.x; Prometheus has been 2.x and later since 2017
        return f"Thanos {version}"
    revision = f" (revision {_text(data['revision'])[:12]})" if data.get("revision") else ""
    return f"Prometheus {version}{revision}"


def _without_revision(build_info: dict[str, Any] | None) -> bool:
    data = build_info.get("data") if build_info is not None else None
    return not isinstance(data, dict) or not data.get("revision")


async def engine_of(client: PrometheusClient) -> str | None:
    """The engine behind `client`'s endpoint in words, e.g. 'Prometheus 2.42.0 (revision 225c61122)',
    'VictoriaMetrics v1.151.0', 'Grafana Mimir 2.14.0'; None when it does not say or cannot be reached
    (the queries' own errors say why)."""
    try:
        build_info = await client.get_json(BUILD_INFO_PATH)
        victoria_config = (
            await client.get_json(VICTORIAMETRICS_CONFIG_PATH) if _without_revision(build_info) else None
        )
    except PrometheusError:
        return None
    return describe(build_info, victoria_config)
