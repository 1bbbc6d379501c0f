"""Prometheus snapshots and the scoring plugins that read them (no Kubernetes, no Kopf).

Typical use by the scheduler::

    plan = plan_from_policy(policy.spec)
    endpoint = await endpoint_from_policy(policy.spec.prometheus, read_secret)
    refresher = Refresher(plan, endpoint, nodes=lambda: NodeDirectory.of(names, addresses))
    refresher.start()
    results = score_nodes(refresher.latest, candidate_nodes)   # per pod: a pure lookup
    status_preflight = preflight_report(await refresher.refresh(), names)
"""

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
from promsched.metrics.identifying import NodeDirectory, NodeIdentity, SeriesReport
from promsched.metrics.planning import Plan, endpoint_from_policy, plan_from_policy
from promsched.metrics.preflighting import preflight, preflight_report
from promsched.metrics.querying import (
    BasicAuth,
    BearerAuth,
    PrometheusClient,
    PrometheusEndpoint,
    SecretReader,
    SecretValue,
)
from promsched.metrics.refreshing import Refresher, RefreshObserver, take_snapshot
from promsched.metrics.samples import QueryResult, Sample, Series
from promsched.metrics.scoring import (
    NEUTRAL_SCORE,
    FilterReason,
    NodeResult,
    PluginResult,
    ScoreMemo,
    score_nodes,
)
from promsched.metrics.snapshots import PluginSnapshot, Snapshot

__all__ = [
    "NEUTRAL_SCORE",
    "BasicAuth",
    "BearerAuth",
    "FilterReason",
    "NodeDirectory",
    "NodeIdentity",
    "NodeResult",
    "Plan",
    "PluginResult",
    "PluginSnapshot",
    "PrometheusBadResponse",
    "PrometheusCertificateError",
    "PrometheusClient",
    "PrometheusEndpoint",
    "PrometheusError",
    "PrometheusHTTPError",
    "PrometheusQueryError",
    "PrometheusRedirectRefused",
    "PrometheusResponseTooLarge",
    "PrometheusTimeout",
    "PrometheusUnreachable",
    "QueryResult",
    "RefreshObserver",
    "Refresher",
    "Sample",
    "ScoreMemo",
    "SecretReader",
    "SecretValue",
    "Series",
    "SeriesReport",
    "Snapshot",
    "endpoint_from_policy",
    "plan_from_policy",
    "preflight",
    "preflight_report",
    "score_nodes",
    "take_snapshot",
]
