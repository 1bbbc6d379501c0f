"""Pods with topology spreading or pod anti-affinity are decided on the boards, the nodes their checks
reject overruling the boards' verdicts: each decision is the one a walk over every node gives."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from promsched.metrics import plan_from_policy
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import Outcome, decide, prepare_checks
from promsched.scheduling.cycle.memos import DecisionMemo
from promsched.scheduling.filters import DEFAULT_CLUSTER_FILTERS, known_rejections
from promsched.scheduling.framework import NodeCheck, Rejection
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from support.objects import HOSTNAME, ZONE, node, pod
from support.placement import anti_affinity, cache_with, required_term
from support.policies import policy_spec
from support.snapshots import snapshot_of

APPS = ("web", "db")


class _Walked:
    """A cluster check that cannot tell its rejections, so `decide` checks each node with it."""

    def __init__(self, check: NodeCheck) -> None:
        self._check = check

    def check(self, node: NodeInfo) -> Any:
        return self._check.check(node)

    def remove_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        self._check.remove_pod(pod, node)

    def add_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        self._check.add_pod(pod, node)


class _Walking:
    def __init__(self, cluster_filter: Any) -> None:
        self._filter = cluster_filter
        self.name, self.events = cluster_filter.name, cluster_filter.events

    def prepare(self, pod: PodInfo, cache: ClusterCache) -> NodeCheck | Rejection | None:
        prepared = self._filter.prepare(pod, cache)
        return _Walked(prepared) if prepared is not None and not isinstance(prepared, Rejection) else prepared


WALKING = tuple(_Walking(cluster_filter) for cluster_filter in DEFAULT_CLUSTER_FILTERS)


def _cluster(rng: random.Random) -> ClusterCache:
    nodes = []
    for index in range(rng.randint(8, 30)):
        zone = rng.choice(
            ["zone-a", "zone-b", "zone-c", None] if index % 7 == 6 else ["zone-a", "zone-b", "zone-c"]
        )
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.1 else None
        labels = {"pool": "main"} if rng.random() < 0.7 else {}
        nodes.append(
            node(f"n{index:02}", zone, labels=labels, taints=taints, cpu=rng.choice(["1", "2", "4"]))
        )
    existing = []
    for index in range(rng.randint(0, 40)):
        app = rng.choice(APPS)
        options: dict[str, Any] = {}
        if rng.random() < 0.15:  # an existing pod that keeps other apps' pods off its host
            other = next(name for name in APPS if name != app)
            options["affinity"] = anti_affinity(required_term({"app": other}))
        existing.append(
            pod(f"e{index}", labels={"app": app}, node_name=rng.choice(nodes).name, cpu="500m", **options)
        )
    return cache_with(nodes, existing)


def _incoming(rng: random.Random, index: int) -> PodInfo:
    app = rng.choice(APPS)
    spec: dict[str, Any] = {"nodeSelector": {"pool": "main"}} if rng.random() < 0.3 else {}
    if rng.random() < 0.7:
        constraint: dict[str, Any] = {
            "maxSkew": rng.choice([1, 1, 2]),
            "topologyKey": rng.choice([ZONE, HOSTNAME]),
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}},
        }
        if rng.random() < 0.2:
            constraint["minDomains"] = 4
        if rng.random() < 0.2:
            constraint["nodeTaintsPolicy"] = "Honor"
        spec["topologySpreadConstraints"] = [constraint]
    if rng.random() < 0.5 or "topologySpreadConstraints" not in spec:
        spec["affinity"] = anti_affinity(required_term({"app": app}, rng.choice([ZONE, HOSTNAME])))
    return pod(f"in-{index}", labels={"app": app}, cpu="500m", **spec)


def _summary(outcome: Outcome) -> tuple[Any, ...]:
    ranked = [(result.node, result.total, result.reasons) for result in outcome.ranked]
    return outcome.node, ranked, outcome.filtered, outcome.next_start, outcome.message


@pytest.mark.parametrize("seed", range(40))
def test_decisions_with_known_rejections_are_those_of_a_walk_over_every_node(seed: int) -> None:
    rng = random.Random(seed)
    cache = _cluster(rng)
    # Some nodes over the cpu threshold: the checks' reasons count before the thresholds', as in a walk.
    loads = {name: rng.choice([10.0, 40.0, 70.0, 95.0]) for name in cache.nodes}
    snapshot = snapshot_of(
        plan_from_policy(policy_spec({"name": "cpu", "threshold": 90})), {"cpu": loads}, time.time()
    )
    on_boards, walked = DecisionMemo(snapshot), DecisionMemo(snapshot)
    start = rng.randrange(len(cache.nodes))
    for index in range(6):
        incoming = _incoming(rng, index)
        assert known_rejections(prepare_checks(incoming, cache, DEFAULT_CLUSTER_FILTERS), cache) is not None
        fast = decide(incoming, cache, snapshot, memo=on_boards, start=start, rng=random.Random(index))
        slow = decide(
            incoming,
            cache,
            snapshot,
            memo=walked,
            start=start,
            rng=random.Random(index),
            cluster_filters=WALKING,
        )
        assert _summary(fast) == _summary(slow)
        if fast.node is not None:
            cache.assume(incoming, fast.node)
        start = fast.next_start
