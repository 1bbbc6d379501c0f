"""Values for the chart that a test renders or installs: the chart refuses to render without an image
repository and a Prometheus host it may query, so tests give both unless they test that refusal."""

from __future__ import annotations

import copy
from typing import Any

# What a user sets at least (the README's install command): where the image is, and their Prometheus.
INSTALLABLE: dict[str, Any] = {
    "image": {"repository": "registry.example/promsched"},
    "prometheus": {"allowedHosts": ["prometheus-operated.monitoring.svc"]},
}


def merged(base: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """`values` over `base` as helm merges values files: maps merge key by key, anything else replaces."""
    result = copy.deepcopy(base)
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def installable(values: dict[str, Any] | None = None) -> dict[str, Any]:
    """`values` over INSTALLABLE."""
    return merged(INSTALLABLE, values or {})
