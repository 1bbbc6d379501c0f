"""SchedulingPolicy specs and objects as the tests build them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promsched.api.policies import SchedulingPolicySpec, parse_spec

# .invalid never resolves: a test that reaches for this Prometheus by mistake fails at once.
PROMETHEUS_URL = "http://prometheus.invalid:9090"


def spec_document(*plugins: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """A valid spec for schedulerName promsched with these plugins (default: cpu); `fields` add or
    replace top-level fields (camelCase, as in the API)."""
    return {
        "schedulerName": "promsched",
        "prometheus": {"url": PROMETHEUS_URL},
        "plugins": [dict(plugin) for plugin in plugins] or [{"name": "cpu"}],
        **fields,
    }


def policy_spec(*plugins: Mapping[str, Any], **fields: Any) -> SchedulingPolicySpec:
    return parse_spec(spec_document(*plugins, **fields))


def policy_object(
    name: str,
    spec: Mapping[str, Any],
    *,
    generation: int = 1,
    created: str = "2026-01-01T00:00:00Z",
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A SchedulingPolicy as the API returns it."""
    return {
        "apiVersion": "promsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name, "generation": generation, "creationTimestamp": created},
        "spec": dict(spec),
        "status": dict(status or {}),
    }
