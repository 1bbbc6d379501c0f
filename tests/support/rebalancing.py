"""Rebalance cycles without a cluster: a policy, a two-node cache, a fake Prometheus answering the
cycle's queries, and a `Harness` recording evictions and Events."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from promsched.api.policies import SchedulingPolicy
from promsched.kube.requests import Request
from promsched.metrics import PrometheusClient, plan_from_policy
from promsched.metrics.identifying import UNAME_QUERY
from promsched.metrics.refreshing import RefreshObserver
from promsched.metrics.scoring import ScoreMemo
from promsched.metrics.snapshots import Snapshot
from promsched.metrics.usage_querying import CPU_USAGE_METRIC, MEMORY_USAGE_METRIC
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.resources import Resources
from promsched.scheduling.policies.recording import PolicyStatus
from promsched.scheduling.policies.runtimes import PolicyRuntime, PolicyRuntimes
from promsched.scheduling.rebalance.rebalancing import Rebalancer
from support.fake_apis import FakeSender
from support.fake_prometheus import FakePrometheus, RecordedRequest
from support.objects import node_object, pod_info
from support.policies import policy_object, spec_document
from support.snapshots import snapshot_of

STARTED = time.time() - 3600
THRESHOLD = {"plugin": "cpu", "hotThreshold": 85, "targetThreshold": 70}
LOADS = {"hot": 95.0, "cool": 20.0}
CPU_USAGE_QUERY_START = f"sum by (namespace, pod) (rate({CPU_USAGE_METRIC}"
MEMORY_USAGE_QUERY_START = f"sum by (namespace, pod) ({MEMORY_USAGE_METRIC}"


def policy(rebalance_mode: str = "Enforce", **fields: Any) -> SchedulingPolicy:
    rebalance = {"mode": rebalance_mode, "thresholds": [THRESHOLD], **fields.pop("rebalance", {})}
    document = spec_document({"name": "cpu"}, rebalance=rebalance, **fields)
    return SchedulingPolicy.from_object(policy_object("p", document))


class StillRefresher:
    """A refresher whose latest snapshot is fixed, with a client for the fake Prometheus."""

    def __init__(self, snapshot: Snapshot, client: PrometheusClient) -> None:
        self.latest = snapshot
        self.client = client
        self.observer = RefreshObserver()

    def scores_for(self, snapshot: Snapshot) -> ScoreMemo:
        return ScoreMemo()


def workload(
    name: str, cpu_milli: int, *, priority: int = 0, controller: str = "", namespace: str = "ns"
) -> PodInfo:
    return pod_info(
        name,
        namespace=namespace,
        node_name="hot",
        phase="Running",
        started_at=STARTED,
        scheduler_name="promsched",
        priority=priority,
        controller=controller or f"ReplicaSet/{name}",
        requests=Resources(milli_cpu=cpu_milli, memory=64 * 2**20),
    )


def hot_and_cool(*pods: PodInfo) -> ClusterCache:
    """Nodes hot and cool, 4 cores each, with `pods` on hot."""
    cache = ClusterCache()
    for name in ("hot", "cool"):
        cache.upsert_node(NodeInfo.from_object(node_object(name, cpu="4")))
    for pod in pods:
        cache.observe_pod(pod)
    return cache


def answer_cycles(
    prometheus: FakePrometheus, sustained: Mapping[str, float], observed: Mapping[str, float]
) -> None:
    """`prometheus` answers a cycle's queries: node_uname_info, the nodes' `sustained` cpu, and the
    cores of the `observed` pods (of namespace ns; memory: none)."""

    async def answer(request: RecordedRequest) -> web.StreamResponse:
        if request.query == UNAME_QUERY:
            return FakePrometheus.vector(
                *(({"instance": f"{node}:9100", "nodename": node}, 1) for node in sustained)
            )
        if request.query.startswith(CPU_USAGE_QUERY_START):
            return FakePrometheus.vector(
                *(({"namespace": "ns", "pod": pod}, cores) for pod, cores in observed.items())
            )
        if request.query.startswith(MEMORY_USAGE_QUERY_START):
            return FakePrometheus.vector()
        assert request.query.startswith("min_over_time((")
        return FakePrometheus.vector(
            *(({"instance": f"{node}:9100"}, value) for node, value in sustained.items())
        )

    prometheus.handler = answer


class BreakingSender(FakeSender):
    """A FakeSender whose requests to a path ending in a key of `errors` raise that exception (a
    dropped connection, a failed token renewal), once each."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: dict[str, BaseException] = {}

    async def send(self, request: Request) -> Any:
        for suffix, error in list(self.errors.items()):
            if request.path.endswith(suffix):
                del self.errors[suffix]
                self.sent.append(request)
                raise error
        return await super().send(request)


class Harness:
    def __init__(
        self, cache: ClusterCache, client: PrometheusClient, sender: FakeSender | None = None, **options: Any
    ) -> None:
        self.sender = sender or FakeSender()
        self.announced: list[tuple[str, str, str]] = []
        self.cache = cache
        self.client = client
        runtimes = PolicyRuntimes(
            self.sender, cache, spawn=lambda coroutine: None, on_snapshot=lambda *a: None
        )
        self.rebalancer = Rebalancer(
            self.sender,
            cache,
            runtimes,
            asyncio.Event(),
            lambda pod, note, scheduler: self.announced.append((pod.key, note, scheduler)),
            **options,
        )

    def runtime(
        self, policy: SchedulingPolicy, loads: dict[str, float], at: float | None = None
    ) -> PolicyRuntime:
        plan = plan_from_policy(policy.spec)
        snapshot = snapshot_of(plan, {"cpu": loads}, at=time.time() if at is None else at)
        runtime = PolicyRuntime("p", "", PolicyStatus(history=10), policy=policy)
        runtime.refresher = StillRefresher(snapshot, self.client)  # type: ignore[assignment]
        return runtime

    def evictions(self) -> list[str]:
        return [request.path for request in self.sender.sent if request.path.endswith("/eviction")]
