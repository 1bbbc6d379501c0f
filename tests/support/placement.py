"""Builders for placement-rule unit tests: a cache holding nodes and pods, a decision with every node
equally loaded, and inter-pod affinity terms."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import Outcome, decide
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.volumes import ClaimInfo, StorageClassInfo, VolumeInfo
from support.objects import HOSTNAME
from support.snapshots import cpu_snapshot


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
