"""Builders for placement-rule unit tests: nodes in zones, pods with labels and rules, a cache holding
them, and a metric snapshot with chosen loads."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping
from typing import Any

from promsched.api.policies import parse_spec
from promsched.metrics import PluginSnapshot, Series, Snapshot, plan_from_policy
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.deciding import Outcome, decide
from promsched.scheduling.nodes import NodeInfo
from promsched.scheduling.pods import PodInfo
from promsched.scheduling.volumes import ClaimInfo, StorageClassInfo, VolumeInfo

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(
    name: str,
    zone: str | None = "zone-a",
    *,
    labels: Mapping[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    cpu: str = "4",
) -> NodeInfo:
    all_labels = {HOSTNAME: name, **({ZONE: zone} if zone else {}), **(labels or {})}
    return NodeInfo.from_object(
        {
            "metadata": {"name": name, "labels": all_labels},
            "spec": {"taints": taints or []},
            "status": {
                "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def pod_object(
    name: str,
    namespace: str = "ns",
    *,
    labels: Mapping[str, str] | None = None,
    node_name: str = "",
    cpu: str = "100m",
    deleting: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    metadata = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": labels or {},
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": metadata,
        "spec": {
            "schedulerName": "promsched",
            **({"nodeName": node_name} if node_name else {}),
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
            **spec,
        },
        # Bound pods have long been running: their load is in the metrics, not a recent placement.
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
        if node_name
        else {"phase": "Pending"},
    }


def pod(name: str, namespace: str = "ns", **options: Any) -> PodInfo:
    return PodInfo.from_object(pod_object(name, namespace, **options))


def cache_with(
    nodes: Iterable[NodeInfo],
    pods: Iterable[PodInfo] = (),
    *,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    claims: Iterable[dict[str, Any]] = (),
    volumes: Iterable[dict[str, Any]] = (),
    storage_classes: Iterable[dict[str, Any]] = (),
) -> ClusterCache:
    cache = ClusterCache()
    for info in nodes:
        cache.upsert_node(info)
    for existing in pods:
        cache.observe_pod(existing)
    for name, labels in (namespaces or {}).items():
        cache.upsert_namespace(name, labels)
    for claim in claims:
        cache.upsert_claim(ClaimInfo.from_object(claim))
    for volume in volumes:
        cache.upsert_volume(VolumeInfo.from_object(volume))
    for storage_class in storage_classes:
        cache.upsert_storage_class(StorageClassInfo.from_object(storage_class))
    return cache


def cpu_snapshot(loads: Mapping[str, float]) -> Snapshot:
    """A fresh snapshot of one cpu plugin with the given busy percent per node (score 100 - load)."""
    spec = parse_spec(
        {
            "schedulerName": "promsched",
            "prometheus": {"url": "http://prometheus:9090"},
            "plugins": [{"name": "cpu"}],
        }
    )
    plan = plan_from_policy(spec)
    now = time.time()
    plugins = {}
    for plugin in plan.plugins:
        series = {name: Series({}, load, now) for name, load in loads.items()}
        plugins[plugin.name] = PluginSnapshot(plugin, plugin.samples(series), series, refreshed_at=now)
    return Snapshot(plan=plan, taken_at=now, plugins=plugins)


def decide_evenly(incoming: PodInfo, cache: ClusterCache, **options: Any) -> Outcome:
    """`decide()` with every node equally loaded, so only filters and preferences tell nodes apart."""
    return decide(
        incoming, cache, cpu_snapshot(dict.fromkeys(cache.nodes, 10.0)), rng=random.Random(1), **options
    )


def required_term(labels: Mapping[str, str], topology_key: str = HOSTNAME, **term: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": topology_key, **term}


def anti_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}
