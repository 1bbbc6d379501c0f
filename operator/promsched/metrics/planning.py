"""A SchedulingPolicy spec compiled into what the metrics layer runs: plugins with their queries, the
refresh settings, and the Prometheus endpoint (with credentials read through the caller's Secret reader).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from promsched.api.estimations import Estimation
from promsched.api.plugin_specs import PluginSpec
from promsched.api.policies import OnMissingMetrics, PrometheusSpec, SchedulingPolicySpec
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins import Plugin, build_plugin
from promsched.metrics.querying import (
    BasicAuth,
    BearerAuth,
    PrometheusEndpoint,
    SecretReader,
    SecretValue,
)


@dataclass(frozen=True)
class Plan:
    """The metrics part of a policy. Plans compare equal when their settings do (not their plugin
    objects), so a refresher restarts only for a change that matters to it."""

    plugins: tuple[Plugin, ...] = field(compare=False)
    plugin_specs: tuple[PluginSpec, ...]
    identity: NodeIdentity
    refresh_interval_seconds: float
    stale_after_seconds: float
    on_missing: OnMissingMetrics
    # How pods' usage is estimated: whether (and over what window) each refresh queries it.
    estimation: Estimation = field(default_factory=Estimation)


def plan_from_policy(spec: SchedulingPolicySpec) -> Plan:
    identity = NodeIdentity.from_spec(spec.node_identity)
    return Plan(
        plugins=tuple(build_plugin(plugin, identity) for plugin in spec.plugins),
        plugin_specs=tuple(spec.plugins),
        identity=identity,
        refresh_interval_seconds=spec.refresh_interval_seconds,
        stale_after_seconds=spec.stale_after_seconds,
        on_missing=spec.on_missing_metrics,
        estimation=spec.estimation,
    )


async def endpoint_from_policy(spec: PrometheusSpec, read_secret: SecretReader | None) -> PrometheusEndpoint:
    """The endpoint for `spec.prometheus`. Tokens, passwords and header values are read again before each
    query; the CA is read now (apply the policy again to pick up a new one). ValueError if a CA does not
    load, or Secrets are named without a reader."""

    def secret(namespace: str, name: str, key: str) -> SecretValue:
        if read_secret is None:
            raise ValueError("spec.prometheus refers to Secrets, but no Secret reader was given")
        return SecretValue(read_secret, namespace, name, key)

    headers = tuple(
        (header.name, secret(header.value_from.namespace, header.value_from.name, header.value_from.key))
        for header in spec.headers or ()
    )
    auth = spec.auth
    if auth is None:
        return PrometheusEndpoint(url=spec.url, timeout_seconds=spec.timeout_seconds, headers=headers)
    authorization: BearerAuth | BasicAuth | None = None
    if auth.bearer_token is not None:
        token = auth.bearer_token
        authorization = BearerAuth(secret(token.namespace, token.name, token.key))
    elif auth.basic_auth is not None:
        basic = auth.basic_auth
        authorization = BasicAuth(
            username=secret(basic.namespace, basic.name, basic.username_key),
            password=secret(basic.namespace, basic.name, basic.password_key),
        )
    ca_pem = await secret(auth.ca.namespace, auth.ca.name, auth.ca.key)() if auth.ca is not None else None
    endpoint = PrometheusEndpoint(
        url=spec.url,
        timeout_seconds=spec.timeout_seconds,
        authorization=authorization,
        headers=headers,
        ca_pem=ca_pem,
        insecure_skip_verify=auth.insecure_skip_verify,
    )
    try:
        endpoint.ssl_context()
    except Exception as error:  # ssl.SSLError or ValueError, depending on how the PEM is broken
        raise ValueError(f"spec.prometheus.auth.ca: the CA certificate does not load: {error}") from error
    return endpoint
