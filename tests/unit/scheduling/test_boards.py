"""The decision memo's boards: a decision read from a board kept across pods (and across snapshots, as
the runtime hands boards to the next snapshot's memo) equals one from a board built afresh and one
reached node by node, through every kind of change the cache sees (pods placed, bound elsewhere and
deleted, nodes tainted, cordoned, resized, added and removed), with herd loads, thresholds and searches
that wrap around the nodes."""

from __future__ import annotations

import random
import time

import pytest

from promsched.metrics import Snapshot, plan_from_policy
from promsched.metrics.scoring import ScoreMemo
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.boards import BOARDS_KEPT, Board, Search
from promsched.scheduling.cycle.deciding import Outcome, decide, feasible_nodes_to_find
from promsched.scheduling.cycle.memos import DecisionMemo
from promsched.scheduling.objects.pods import PodInfo
from support.clocks import Clock
from support.objects import node, pod
from support.policies import policy_spec
from support.snapshots import snapshot_of

NODES = 150  # more than feasible_nodes_to_find keeps: searches stop early and wrap around
TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}


def snapshot(rng: random.Random, names: list[str], at: float, on_missing: str = "Neutral") -> Snapshot:
    """cpu (1m window, threshold 85: some nodes are filtered by load) and memory; a few nodes have no
    cpu sample, scored as `on_missing` says."""
    plan = plan_from_policy(
        policy_spec(
            {"name": "cpu", "timeRange": "1m", "threshold": 85},
            {"name": "memory", "timeRange": "0s", "threshold": 95},
            onMissingMetrics=on_missing,
        )
    )
    cpu = {name: rng.uniform(0, 100) for name in names if rng.random() > 0.05}
    memory = {name: rng.uniform(0, 90) for name in names}
    return snapshot_of(plan, {"cpu": cpu, "memory": memory}, at)


def pending(rng: random.Random, name: str) -> PodInfo:
    """One of a few pod shapes, as a burst of a few workloads has."""
    shape = rng.randrange(4)
    if shape == 3:
        return pod(name, cpu="250m", tolerations=[TOLERATION])
    return pod(name, cpu=("100m", "500m", "1500m")[shape])


def change(rng: random.Random, cache: ClusterCache, clock: Clock, step: int) -> None:
    """One of the changes the cache sees between two decisions, at random."""
    names = list(cache.nodes)
    kind = rng.randrange(9)
    target = rng.choice(names)
    counted = sorted(cache.counted)
    # Pods running since long before: counted on their node with no placement the herd load reads.
    foreign = [uid for uid in counted if "foreign" in uid]
    if kind == 0:
        cache.upsert_node(node(target, version=str(step), taints=[TAINT] if rng.random() < 0.5 else None))
    elif kind == 1:
        cache.upsert_node(node(target, version=str(step), unschedulable=rng.random() < 0.5))
    elif kind == 2:
        cache.upsert_node(node(target, version=str(step), cpu=rng.choice(("2", "4", "8"))))
    elif kind == 3 and len(names) > NODES // 2:
        cache.remove_node(target)
    elif kind == 4:
        cache.upsert_node(node(f"late-{step}"))
    elif kind == 5 and counted:
        cache.remove_pod(rng.choice(counted))
    elif kind == 6:
        cache.observe_pod(pod(f"foreign-{step}", node_name=target, cpu="2"))
    elif kind == 7 and foreign:
        cache.remove_pod(rng.choice(foreign))
    else:
        clock.advance(rng.uniform(0, 20))


def reached_node_by_node(pod_info: PodInfo, cache: ClusterCache, snapshot: Snapshot, start: int) -> Outcome:
    """The decision as the node loop reaches it: a pod nominated to a node that does not exist keeps
    every node's judgement off the boards and changes no node's."""
    elsewhere = pod("held-elsewhere")
    cache.nominate(elsewhere, "no-such-node")
    try:
        return decide(
            pod_info, cache, snapshot, memo=DecisionMemo(snapshot), start=start, rng=random.Random(0)
        )
    finally:
        cache.unnominate(elsewhere.uid)


@pytest.mark.parametrize(
    ("seed", "snapshot_every", "on_missing"),
    [
        *((seed, every, "Neutral") for seed, every in ((1, 0), (2, 0), (3, 0), (4, 20), (5, 7))),
        *((seed, every, "Requests") for seed, every in ((6, 0), (7, 7))),
    ],
)
def test_a_board_kept_across_pods_decides_as_one_built_afresh_and_as_the_node_loop(
    seed: int, snapshot_every: int, on_missing: str
) -> None:
    """`snapshot_every` > 0: a new snapshot every that many pods, its memo taking the boards over.
    Requests: the nodes without a cpu sample score by their pods' requests, which every placement,
    departure and resize changes."""
    assert feasible_nodes_to_find(NODES) < NODES
    rng = random.Random(seed)
    now = time.time()
    clock = Clock(now)
    cache = ClusterCache(clock=clock)
    for index in range(NODES):
        cache.upsert_node(node(f"n{index}", taints=[TAINT] if index % 10 == 0 else None))
    the_snapshot = snapshot(rng, list(cache.nodes), now, on_missing)
    memo = DecisionMemo(the_snapshot)
    start = 0
    placed = 0
    for step in range(300):
        if snapshot_every and step % snapshot_every == snapshot_every - 1:
            the_snapshot = snapshot(rng, list(cache.nodes), clock(), on_missing)
            memo = DecisionMemo(the_snapshot, boards=memo.boards.following(memo.scores.scored))
        change(rng, cache, clock, step)
        pod_info = pending(rng, f"p{step}")
        kept = decide(pod_info, cache, the_snapshot, memo=memo, start=start, rng=random.Random(0))
        afresh = decide(
            pod_info, cache, the_snapshot, memo=DecisionMemo(the_snapshot), start=start, rng=random.Random(0)
        )
        assert kept == afresh, f"step {step}"
        assert kept == reached_node_by_node(pod_info, cache, the_snapshot, start), f"step {step}"
        if kept.node is not None:
            cache.assume(pod_info, kept.node)
            placed += 1
        start = kept.next_start
    assert placed > 100  # the burst filled nodes: decisions saw nodes filtered for room
    assert memo.boards.kept  # and were read from boards


def test_a_search_judges_only_the_due_nodes_it_reaches() -> None:
    """A new pod spec, then a new snapshot: each decision judges the nodes up to its wanted-th feasible
    one, and every other node stays due (judged later, by the searches that reach it)."""
    rng = random.Random(11)
    now = time.time()
    cache = ClusterCache()
    for index in range(400):
        cache.upsert_node(node(f"n{index}", taints=[TAINT] if index % 10 == 0 else None))
    total, wanted = len(cache.nodes), feasible_nodes_to_find(len(cache.nodes))
    memo = DecisionMemo(snapshot(rng, list(cache.nodes), now))
    start = 0
    for step in range(2):
        outcome = decide(pod(f"p{step}"), cache, memo.snapshot, memo=memo, start=start, rng=random.Random(0))
        [board] = memo.boards.kept.values()
        searched = (outcome.next_start - start) % total
        assert wanted <= searched < total
        window = {(start + offset) % total for offset in range(searched)}
        assert [position for position in range(total) if board.unscored[position]] == [
            position for position in range(total) if position not in window and board.passed[position]
        ], f"step {step}"
        # The first search left nodes unjudged (their filters due too); the second, starting where the
        # first stopped, reached them.
        assert any(board.unjudged) == (step == 0)
        start = outcome.next_start
        memo = memo.succeeded_by(snapshot(rng, list(cache.nodes), now), ScoreMemo())


def board_of(feasible: str) -> Board:
    """A board over nodes a, b, c... whose feasibility `feasible` spells: 1 feasible, 0 filtered."""
    names = [chr(ord("a") + index) for index in range(len(feasible))]
    return Board(
        cache=ClusterCache(),
        scored=None,
        names=names,
        index={name: index for index, name in enumerate(names)},
        nodes=[None] * len(names),
        feasible=bytearray(int(flag) for flag in feasible),
        passed=bytearray(int(flag) for flag in feasible),
        results=[None] * len(names),
        reasons=[None if flag == "1" else "full" for flag in feasible],
        counts=(0, 0, 0),
        unjudged=bytearray(len(names)),
        unscored=bytearray(len(names)),
    )


@pytest.mark.parametrize(
    ("feasible", "start", "wanted", "searched", "filtered"),
    [
        ("11111", 0, 3, 3, 0),  # stops at the wanted-th feasible node
        ("10101", 1, 2, 4, 2),  # the filtered nodes on the way are counted
        ("11001", 3, 3, 4, 1),  # wraps around past the last node
        ("10001", 2, 5, 5, 3),  # fewer feasible than wanted: every node is searched
        ("00000", 4, 1, 5, 5),
    ],
)
def test_a_search_takes_the_nodes_up_to_the_wanted_feasible_one(
    feasible: str, start: int, wanted: int, searched: int, filtered: int
) -> None:
    search = board_of(feasible).search(start, wanted)
    assert isinstance(search, Search)
    assert search.searched == searched
    assert search.filtered == ({"full": filtered} if filtered else {})


def test_boards_are_kept_for_a_few_pod_specs() -> None:
    the_snapshot = snapshot(random.Random(0), ["n1"], time.time())
    cache = ClusterCache()
    cache.upsert_node(node("n1"))
    memo = DecisionMemo(the_snapshot)
    for millis in range(100, 100 + (BOARDS_KEPT + 4) * 10, 10):
        decide(pod("p", cpu=f"{millis}m"), cache, the_snapshot, memo=memo)
    assert len(memo.boards.kept) == BOARDS_KEPT


@pytest.mark.parametrize("with_boards", [True, False])
def test_past_stale_after_requests_place_a_pod_where_the_least_is_requested(with_boards: bool) -> None:
    """Prometheus silent for longer than staleAfter: onMissingMetrics Requests places as
    kube-scheduler's LeastAllocated would, on the boards and node by node alike."""
    plan = plan_from_policy(policy_spec({"name": "cpu"}, onMissingMetrics="Requests", staleAfter="2m"))
    the_snapshot = snapshot_of(plan, {"cpu": {"a": 5, "b": 90, "c": 5}}, time.time() - 300)
    cache = ClusterCache()
    for name, requested in (("a", "3"), ("b", "1"), ("c", "2")):
        cache.upsert_node(node(name, cpu="4"))
        cache.observe_pod(pod(f"running-{name}", node_name=name, cpu=requested))
    elsewhere = pod("held-elsewhere")
    if not with_boards:
        cache.nominate(elsewhere, "no-such-node")  # keeps the decision off the boards
    outcome = decide(pod("p", cpu="100m"), cache, the_snapshot, memo=DecisionMemo(the_snapshot))
    assert outcome.node == "b"
