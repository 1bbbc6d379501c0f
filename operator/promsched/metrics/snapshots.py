"""Immutable snapshots: every plugin's per-node samples from one refresh, with what went wrong."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from promsched.metrics.dividing import Divisors
from promsched.metrics.errors import PrometheusError
from promsched.metrics.identifying import Hostnames, SeriesReport
from promsched.metrics.planning import Plan
from promsched.metrics.plugins import Plugin
from promsched.metrics.samples import Sample
from promsched.metrics.usage_querying import NO_POD_USAGE, PodUsage

_EMPTY: Mapping[str, Sample] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PluginSnapshot:
    """One plugin's part of a snapshot.

    After a failed query the previous samples stay (they age until `staleAfter` makes them missing)
    and `error` says why they were not renewed; a changed plugin with the same query rescores them
    (`Plugin.rescored`). `divisors`: a split query's (`dividing`), kept for the next refreshes.
    """

    plugin: Plugin
    samples: Mapping[str, Sample]
    refreshed_at: float | None  # unix time of the last successful query; None: none yet
    error: PrometheusError | None = None  # why the latest query failed; None when it succeeded
    report: SeriesReport = field(default_factory=SeriesReport)
    divisors: Divisors | None = None

    @classmethod
    def empty(cls, plugin: Plugin) -> PluginSnapshot:
        return cls(plugin=plugin, samples=_EMPTY, refreshed_at=None)


def empty_usage(plan: Plan) -> PodUsage:
    """What a plan knows of pods' usage before its first usage queries are answered."""
    estimation = plan.estimation
    return PodUsage.empty(estimation.window_seconds) if estimation.queries_usage else NO_POD_USAGE


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Every plugin of `plan` as of `taken_at` (unix seconds). Scored under its own plan (weights,
    thresholds, staleness), so a lookup never mixes one policy's samples with another's settings."""

    plan: Plan
    taken_at: float
    plugins: Mapping[str, PluginSnapshot]
    usage: PodUsage = NO_POD_USAGE  # what pods used, for usage estimates (none: the plan queries none)
    # node_uname_info's answer the plugins mapped through, kept for the next refreshes; None: none to keep
    # (no plugin maps through it, or asking failed with none kept before).
    hostnames: Hostnames | None = None

    @classmethod
    def empty(cls, plan: Plan, taken_at: float) -> Snapshot:
        """The snapshot before the first refresh: every node is missing every metric."""
        plugins = {plugin.name: PluginSnapshot.empty(plugin) for plugin in plan.plugins}
        return cls(plan=plan, taken_at=taken_at, plugins=MappingProxyType(plugins), usage=empty_usage(plan))

    def values(self) -> dict[str, Mapping[str, Sample]]:
        """``{plugin: {node: Sample}}``."""
        return {name: plugin.samples for name, plugin in self.plugins.items()}

    @property
    def errors(self) -> dict[str, PrometheusError]:
        """The plugins whose latest query failed, and why."""
        return {name: plugin.error for name, plugin in self.plugins.items() if plugin.error is not None}

    def age_seconds(self, plugin: str, now: float) -> float | None:
        """How old the plugin's values are (None: it never had any), for a metric-age gauge."""
        refreshed_at = self.plugins[plugin].refreshed_at
        return None if refreshed_at is None else now - refreshed_at
