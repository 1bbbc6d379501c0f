"""What every pod uses, from the containers' cAdvisor series: one vector query per resource per refresh.

The kubelet's cAdvisor names them `container_cpu_usage_seconds_total` (a counter of CPU seconds, rated
over the estimation window) and `container_memory_working_set_bytes` (a gauge), labelled namespace,
pod, container and node. The pod's sandbox ("POD") and the pod-level cgroup (container="") are left
out, as kube-prometheus's recording rules leave them out, so each container counts once. A rebalance
cycle asks the same of the pods it may move alone (`PodUsage.empty(window, pods)`): one query per
resource for all of them.

A failed query keeps the resource's previous values (they age out through staleAfter), as a plugin's do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from promsched.metrics import promql
from promsched.metrics.errors import PrometheusError
from promsched.metrics.offloading import off_loop_then_let_go, paced
from promsched.metrics.querying import PrometheusClient
from promsched.metrics.samples import QueryResult

logger = logging.getLogger(__name__)

CPU_USAGE_METRIC: Final = "container_cpu_usage_seconds_total"
MEMORY_USAGE_METRIC: Final = "container_memory_working_set_bytes"
# What the refresh observer calls the two queries (its `plugin` label), after the spec section.
CPU_USAGE_QUERY_NAME: Final = "estimation.cpu"
MEMORY_USAGE_QUERY_NAME: Final = "estimation.memory"

PodKey = tuple[str, str]  # (namespace, pod name)
QueryFinished = Callable[[str, float, PrometheusError | None], None]
"""Called after each usage query with its name, duration and error (the refresh observer's hook)."""


def _containers(pods: Collection[PodKey]) -> str:
    """The containers' series; of `pods` alone when some are named (every pod's when none are)."""
    matchers = ['container!=""', 'container!="POD"']
    if pods:
        namespaces = sorted({namespace for namespace, _name in pods})
        names = sorted({name for _namespace, name in pods})
        matchers += [
            promql.matches("namespace", promql.any_of(namespaces)),
            promql.matches("pod", promql.any_of(names)),
        ]
    return "{" + ", ".join(matchers) + "}"


def cpu_usage_query(window_seconds: float, pods: Collection[PodKey] = ()) -> str:
    """Cores each pod (of `pods`, when given) used, on average over the window."""
    window = promql.duration(window_seconds)
    return f"sum by (namespace, pod) (rate({CPU_USAGE_METRIC}{_containers(pods)}[{window}]))"


def memory_usage_query(pods: Collection[PodKey] = ()) -> str:
    """Bytes each pod's (of `pods`, when given) containers hold in their working sets now."""
    return f"sum by (namespace, pod) ({MEMORY_USAGE_METRIC}{_containers(pods)})"


_NO_VALUES: Mapping[PodKey, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """One resource's per-pod values from its latest answered query."""

    query: str
    values: Mapping[PodKey, float] = field(default_factory=lambda: _NO_VALUES)
    refreshed_at: float | None = None  # unix time of the query that gave `values`; None: none yet
    error: PrometheusError | None = None  # why the latest query failed; None when it succeeded

    def fresh_values(self, fresh_since: float) -> Mapping[PodKey, float]:
        """The values, or none when they are older than `fresh_since`."""
        if self.refreshed_at is None or self.refreshed_at < fresh_since:
            return _NO_VALUES
        return self.values


@dataclass(frozen=True, slots=True)
class PodUsage:
    """What pods used at one refresh: CPU in cores, memory in bytes, by (namespace, pod)."""

    cpu: ResourceUsage
    memory: ResourceUsage

    @classmethod
    def empty(cls, window_seconds: float, pods: Collection[PodKey] = ()) -> PodUsage:
        """Nothing known yet, of every pod or of `pods` alone."""
        return cls(
            ResourceUsage(cpu_usage_query(window_seconds, pods)), ResourceUsage(memory_usage_query(pods))
        )


NO_POD_USAGE: Final = PodUsage(ResourceUsage(""), ResourceUsage(""))
"""The usage of a plan that queries none (estimation source Requests)."""


def _by_pod(result: QueryResult) -> dict[PodKey, float]:
    # On the metrics worker: a series per pod.
    values = {}
    for series in paced(result.series):
        namespace, pod = series.labels.get("namespace"), series.labels.get("pod")
        if namespace and pod:
            values[(namespace, pod)] = series.value
    return values


async def _refresh_resource(
    name: str,
    previous: ResourceUsage,
    client: PrometheusClient,
    at: float,
    finished: QueryFinished,
) -> ResourceUsage:
    started = time.monotonic()
    try:
        result = await client.query(previous.query, at=at)
    except PrometheusError as error:
        finished(name, time.monotonic() - started, error)
        repeated = previous.error is not None and str(previous.error) == str(error)
        logger.log(logging.DEBUG if repeated else logging.WARNING, "Pod usage (%s): %s", name, error)
        return dataclasses.replace(previous, error=error)
    finished(name, time.monotonic() - started, None)
    values = await off_loop_then_let_go(_by_pod, result)
    return ResourceUsage(previous.query, MappingProxyType(values), at)


async def refresh_usage(
    previous: PodUsage,
    client: PrometheusClient,
    at: float,
    finished: QueryFinished,
    names: tuple[str, str] = (CPU_USAGE_QUERY_NAME, MEMORY_USAGE_QUERY_NAME),
) -> PodUsage:
    """Both resources' queries, concurrently; `finished` hears of them by `names` (cpu, memory)."""
    cpu_name, memory_name = names
    cpu, memory = await asyncio.gather(
        _refresh_resource(cpu_name, previous.cpu, client, at, finished),
        _refresh_resource(memory_name, previous.memory, client, at, finished),
    )
    return PodUsage(cpu, memory)
