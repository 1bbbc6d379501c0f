"""Pods with host ports are decided on the boards, which judge anew only the nodes whose pods changed,
rather than by the node walk (issue 43): over sequences of decisions, placements and departures on random
clusters, every decision is the walk's."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import Outcome, decide
from promsched.scheduling.cycle.memos import DecisionMemo
from promsched.scheduling.filters.fit import NodeResourcesFit
from promsched.scheduling.filters.node_verdicts import usage_only
from promsched.scheduling.filters.ports import NodePorts
from promsched.scheduling.filters.unschedulable import NodeUnschedulable
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from support.objects import node, pod
from support.snapshots import cpu_snapshot


def with_ports(name: str, rng: random.Random) -> PodInfo:
    """A pod with a host port or two, on a wildcard or a given address, TCP or UDP; a third request
    nothing, as DaemonSets' pods often do."""
    ports = [
        {
            "containerPort": 80,
            "hostPort": rng.choice((8080, 8081, 9100)),
            **({"hostIP": rng.choice(("10.0.0.1", "10.0.0.2"))} if rng.random() < 0.3 else {}),
            **({"protocol": "UDP"} if rng.random() < 0.2 else {}),
        }
        for _ in range(rng.choice((1, 1, 2)))
    ]
    resources = {"requests": {"cpu": rng.choice(("100m", "1"))}} if rng.random() < 0.7 else {}
    return pod(name, containers=[{"name": "c", "resources": resources, "ports": ports}])


def walking(pod_info: PodInfo, cache: ClusterCache, monkeypatch: pytest.MonkeyPatch) -> Outcome:
    """The decision the node walk makes, as it did for every pod with host ports."""
    with monkeypatch.context() as patched:
        patched.setattr(NodePorts, "usage_only", False)
        snapshot = cpu_snapshot(dict.fromkeys(cache.nodes, 10.0))
        return decide(pod_info, cache, snapshot, rng=random.Random(1))


def compared(outcome: Outcome) -> tuple[Any, ...]:
    return outcome.node, outcome.filtered, outcome.message, [result.node for result in outcome.ranked]


@pytest.mark.parametrize("seed", range(40))
def test_decisions_on_the_boards_are_the_node_walks(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    cache = ClusterCache()
    for index in range(rng.randint(1, 12)):
        cache.upsert_node(node(f"n{index}", cpu=rng.choice(("1", "4"))))
    memo = DecisionMemo(cpu_snapshot(dict.fromkeys(cache.nodes, 10.0)))
    placed: list[str] = []
    for step in range(30):
        if placed and rng.random() < 0.3:  # a pod leaves, perhaps one that requested nothing
            cache.remove_pod(placed.pop(rng.randrange(len(placed))))
        incoming = with_ports(f"p{step}", rng)

        outcome = decide(incoming, cache, memo.snapshot, memo=memo, rng=random.Random(1))

        assert compared(outcome) == compared(walking(incoming, cache, monkeypatch)), step
        if outcome.node is not None:
            cache.assume(incoming, outcome.node)
            placed.append(incoming.uid)


def test_a_pod_with_host_ports_judges_only_the_nodes_whose_pods_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = ClusterCache()
    for index in range(20):
        cache.upsert_node(node(f"n{index}"))
    memo = DecisionMemo(cpu_snapshot(dict.fromkeys(cache.nodes, 10.0)))
    rng = random.Random(1)
    first = with_ports("first", rng)
    outcome = decide(first, cache, memo.snapshot, memo=memo, rng=rng)
    assert outcome.node is not None
    cache.assume(first, outcome.node)
    judged: list[str] = []
    original = NodePorts.filter

    def counting(self: NodePorts, pod_info: PodInfo, node_info: NodeInfo, usage: NodeUsage) -> Any:
        judged.append(node_info.name)
        return original(self, pod_info, node_info, usage)

    monkeypatch.setattr(NodePorts, "filter", counting)

    second = dataclasses.replace(first, name="second", uid="second")  # alike: on the same board
    decide(second, cache, memo.snapshot, memo=memo, rng=rng)

    assert judged == [outcome.node]


def test_host_ports_and_requests_are_read_of_the_usage_alone_and_taints_are_not() -> None:
    assert usage_only((NodePorts(), NodeResourcesFit()))
    assert usage_only(())
    assert not usage_only((NodePorts(), NodeUnschedulable()))
