"""The scheduling cycle alone, without a cluster: `decide()` for a burst of pods on N simulated nodes.

    python -m bench.decide_micro [--nodes 1000] [--pods 300] [--profile] [--cycle] [--shapes all] [--bound]

It builds the scheduler's cache from the same node objects the sandbox creates, a snapshot of the
benchmark's policy from the same skewed load profiles, and then decides and assumes pods one after
another, as `Scheduler.schedule_one` does. It reports CPU milliseconds per decision (process time: other
programs on a shared machine inflate wall time, not this) with Python's garbage collector as it is,
with the heap frozen after set-up (`gc.freeze()`), and with it disabled; `--profile` adds a cProfile
of the decisions. Use it to check a change to the hot path before the full benchmark.

`--shapes` measures decisions for pods with placement rules too, one pod shape after another
(`bench.pods.SHAPES`: spreading over zones or hosts, preferred or required pod anti-affinity, a host
port; and `affinity-required`, the bench pods' zone as required pod affinity), each the best of three
bursts on a fresh cache; `--profile` then profiles the last shape named.

`--bound` measures CPU microseconds per Running status update of a bound pod (`Intake.on_bound_pod`,
the bound pods' watch), the best of three rounds of `--pods` pods on a fresh scheduler.

`--cycle` measures, besides, the scheduler's whole synchronous work per pod: the pod's watch events
parsed (`Intake.on_event`: pending, bound, then running as the kubelet reports it), its cycle
(`schedule_one`: decision, its record, annotation) and the binding and event requests built, sent to a
sender that answers at once. The API server, the watch, Kopf and the status writes (once a second) are
not in it. It also times a full garbage collection on the scheduler's heap with `--held` running pods,
before and after `gc.freeze()`.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import gc
import pstats
import random
import time
from collections.abc import Callable
from typing import Any

from bench.loads import skewed_profiles
from bench.pods import POD_LABELS, SHAPES, pod_manifest
from bench.variants import policy_spec
from promsched.api.policies import parse_spec
from promsched.kube.requests import Request
from promsched.metrics import PluginSnapshot, Series, Snapshot, plan_from_policy
from promsched.metrics.planning import Plan
from promsched.metrics.scoring import ScoreMemo
from promsched.sandbox.launching import ZONE_LABEL, node_manifest
from promsched.sandbox.node_metrics.profiles import LoadProfile, NodeSetup
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import decide
from promsched.scheduling.cycle.memos import DecisionMemo
from promsched.scheduling.intake.kinds import NODES, PODS
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.schedulers import Scheduler

# Which profile field each built-in plugin reads.
PROFILE_FIELD = {
    "cpu": "cpu",
    "memory": "memory",
    "diskIO": "diskBusy",
    "diskSpace": "diskUsed",
    "network": "network",
}


def node_objects(nodes: int) -> list[dict[str, object]]:
    """The sandbox's node objects, Ready, as the API returns them."""
    objects = []
    for index in range(nodes):
        manifest = node_manifest(f"node-{index}", index, NodeSetup(LoadProfile()))
        status = manifest["status"]
        assert isinstance(status, dict)
        status["conditions"] = [{"type": "Ready", "status": "True"}]
        metadata = manifest["metadata"]
        assert isinstance(metadata, dict)
        metadata["resourceVersion"] = "1"
        objects.append(manifest)
    return objects


def build(nodes: int, seed: int = 8) -> tuple[ClusterCache, Snapshot]:
    cache = ClusterCache()
    for manifest in node_objects(nodes):
        cache.upsert_node(NodeInfo.from_object(manifest))
    return cache, snapshot_of(list(cache.nodes), plan_from_policy(parse_spec(bench_policy())), seed)


def bench_policy() -> dict[str, Any]:
    return policy_spec("http://127.0.0.1:9090", "15s")


def snapshot_of(names: list[str], plan: Plan, seed: int = 8) -> Snapshot:
    """The benchmark's skewed loads on `names`, read just now."""
    profiles = skewed_profiles(names, seed + len(names))
    now = time.time()
    plugins = {}
    for plugin in plan.plugins:
        field = PROFILE_FIELD[plugin.name]
        series = {name: Series({}, profiles[name][field], now) for name in names}
        plugins[plugin.name] = PluginSnapshot(plugin, plugin.samples(series), refreshed_at=now)
    return Snapshot(plan=plan, taken_at=now, plugins=plugins)


# Shapes of this bench's own besides `bench.pods.SHAPES`: what each adds to the pod's spec.
_ZONE_AFFINITY = [{"topologyKey": ZONE_LABEL, "labelSelector": {"matchLabels": POD_LABELS}}]
OWN_SHAPES: dict[str, dict[str, Any]] = {
    "affinity-required": {
        "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": _ZONE_AFFINITY}}
    }
}
ALL_SHAPES = (*SHAPES, *OWN_SHAPES)


def manifest_of(name: str, scheduler_name: str, shape: str) -> dict[str, Any]:
    manifest = pod_manifest("bench", name, scheduler_name, shape=shape if shape in SHAPES else "plain")
    manifest["spec"] |= OWN_SHAPES.get(shape, {})
    return manifest


def pod(index: int, shape: str = "plain") -> PodInfo:
    """The benchmark's pod of `shape` (`ALL_SHAPES`), pending."""
    manifest = manifest_of(f"p-{index}", "bench-promsched", shape)
    manifest["metadata"] |= {"uid": f"uid-{index}", "resourceVersion": "1"}
    return PodInfo.from_object(manifest | {"status": {"phase": "Pending"}})


# ----- the measurement ----------------------------------------------------------------------------------


def burst(
    nodes: int, pods: int, chosen: list[str] | None = None, shape: str = "plain"
) -> Callable[[], float]:
    """A fresh cache and snapshot; the returned callable decides and assumes `pods` pods of `shape`,
    returning the seconds it took."""
    cache, snapshot = build(nodes)
    queue = [pod(i, shape) for i in range(pods)]
    rng = random.Random(1)
    memo = DecisionMemo(snapshot)

    def run() -> float:
        started = time.process_time()
        start = 0
        for item in queue:
            outcome = decide(item, cache, snapshot, memo=memo, start=start, rng=rng)
            start = outcome.next_start
            assert outcome.node is not None
            cache.assume(item, outcome.node)
            if chosen is not None:
                chosen.append(outcome.node)
        return time.process_time() - started

    return run


def measure(nodes: int, pods: int) -> list[dict[str, object]]:
    """ms per decision as the package is, under three garbage-collector settings."""
    rows: list[dict[str, object]] = []
    nothing: Callable[[], None] = lambda: None  # noqa: E731
    settings: tuple[tuple[str, Callable[[], None], Callable[[], None]], ...] = (
        ("as is", nothing, nothing),
        ("as is, gc.freeze() after set-up", gc.freeze, gc.unfreeze),
        ("as is, gc disabled", gc.disable, gc.enable),
    )
    for label, before, after in settings:
        run = burst(nodes, pods)
        gc.collect()
        before()
        seconds = run()
        after()
        rows.append(
            {"nodes": nodes, "pods": pods, "variant": label, "ms_per_decision": 1000 * seconds / pods}
        )
    return rows


def measure_shapes(nodes: int, pods: int, shapes: list[str], rounds: int = 3) -> dict[str, float]:
    """ms per decision for each pod shape: the best of `rounds` bursts, each on a fresh cache."""
    return {
        shape: 1000 * min(burst(nodes, pods, shape=shape)() for _ in range(rounds)) / pods for shape in shapes
    }


# ----- the whole cycle ----------------------------------------------------------------------------------


class AnsweringSender:
    """The API server's part, answered at once: every request succeeds with an empty object."""

    async def send(self, request: Request) -> Any:
        return {}


class FixedRefresher:
    """The policy's metrics: the benchmark's skewed loads, taken once, no Prometheus."""

    def __init__(self, plan: Plan, endpoint: object, nodes: Callable[[], Any], **_: object) -> None:
        self.plan = plan
        # In `build`'s order (node-0, node-1, ...): the loads drawn follow it.
        names = sorted(nodes().names, key=lambda name: int(name.rsplit("-", 1)[1]))
        self.latest = snapshot_of(names, plan)

    def start(self) -> None:
        return

    async def refresh(self) -> Snapshot:
        return self.latest

    async def engine(self) -> str | None:
        return None

    async def update(self, plan: Plan, endpoint: object) -> bool:
        self.plan = plan
        return True

    async def stop(self) -> None:
        return

    def scores_for(self, snapshot: Snapshot) -> ScoreMemo:
        return ScoreMemo()


def pod_object(index: int, scheduler_name: str, shape: str = "plain") -> dict[str, Any]:
    """A benchmark pod as the watch delivers it: with what the API server's admission adds."""
    manifest = manifest_of(f"p-{index}", scheduler_name, shape)
    manifest["metadata"] |= {
        "uid": f"uid-{index}",
        "resourceVersion": str(10 + index),
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    manifest["spec"] |= {
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        ],
    }
    manifest["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return manifest


def next_state(obj: dict[str, Any], **parts: Any) -> dict[str, Any]:
    """The pod's next state as its watch event brings it: `parts` replaced, at the next resourceVersion."""
    version = str(int(obj["metadata"]["resourceVersion"]) + 1)
    return obj | parts | {"metadata": obj["metadata"] | {"resourceVersion": version}}


def running_status(spec: dict[str, Any]) -> dict[str, Any]:
    """The status the kubelet (kwok) writes once a pod runs: its phase, start, conditions and containers
    with the resources they were given (in-place resize's status fields)."""
    now = "2026-01-01T00:00:05Z"
    return {
        "phase": "Running",
        "startTime": now,
        "hostIP": "10.0.0.1",
        "podIP": "10.1.0.1",
        "qosClass": "Burstable",
        "conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": now}
            for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": container["name"],
                "ready": True,
                "started": True,
                "restartCount": 0,
                "image": container["image"],
                "state": {"running": {"startedAt": now}},
                "allocatedResources": container["resources"]["requests"],
                "resources": container["resources"],
            }
            for container in spec["containers"]
        ],
    }


def bench_scheduler() -> Scheduler:
    """A scheduler whose API requests are answered at once and whose refreshers hold fixed metrics."""
    refresher_factory: Any = FixedRefresher  # answers what the scheduler asks of a Refresher
    return Scheduler(AnsweringSender(), refresher_factory=refresher_factory, rng=random.Random(1))


def add_nodes_and_policy(loop: asyncio.AbstractEventLoop, scheduler: Scheduler, nodes: int) -> str:
    """Feeds the sandbox's node objects and the benchmark's policy; returns its scheduler name."""
    spec = bench_policy()
    for manifest in node_objects(nodes):
        scheduler.intake.on_event(NODES, "ADDED", manifest)
    policy = {
        "apiVersion": "promsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "bench", "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
    }
    loop.run_until_complete(scheduler.on_policy("ADDED", policy))
    return str(spec["schedulerName"])


async def place(scheduler: Scheduler, obj: dict[str, Any]) -> str:
    """One pod as the watch and the cycle see it: added pending, decided, bound (the binding and its
    event sent), then its bound and running states; returns its node."""
    scheduler.intake.on_event(PODS, "ADDED", obj)
    entry = scheduler.queue.pop_nowait()
    assert entry is not None
    outcome = scheduler.schedule_one(entry)
    assert outcome is not None
    assert outcome.node is not None
    while scheduler._tasks:  # the binding and its event, sent
        await asyncio.wait(list(scheduler._tasks))
    bound = next_state(obj, spec=obj["spec"] | {"nodeName": outcome.node})
    scheduler.intake.on_event(PODS, "MODIFIED", bound)
    scheduler.intake.on_event(PODS, "MODIFIED", next_state(bound, status=running_status(bound["spec"])))
    return outcome.node


def fed_scheduler(
    loop: asyncio.AbstractEventLoop, nodes: int, held: int = 0, first_held: int = 0
) -> tuple[Scheduler, str]:
    """A scheduler fed the nodes, the benchmark's policy and `held` pods running on them (p-`first_held`
    on), with its scheduler name."""
    scheduler = bench_scheduler()
    scheduler_name = add_nodes_and_policy(loop, scheduler, nodes)
    for index in range(held):  # pods already placed: a long-running scheduler's heap
        running = pod_object(first_held + index, "another-scheduler")
        running["spec"]["nodeName"] = f"node-{index % nodes}"
        running["status"] = running_status(running["spec"])
        scheduler.intake.on_event(PODS, "ADDED", running)
    return scheduler, scheduler_name


def cycle_burst(nodes: int, pods: int, held: int = 0, shape: str = "plain") -> Callable[[], float]:
    """A scheduler fed the nodes, `held` pods running on them and the policy; the returned callable feeds
    `pods` pods of `shape` one after another through their event, cycle, binding, bound and running
    events, returning the seconds it took."""
    loop = asyncio.new_event_loop()
    scheduler, scheduler_name = fed_scheduler(loop, nodes, held, first_held=pods)
    objects = [pod_object(i, scheduler_name, shape) for i in range(pods)]

    async def feed() -> None:
        for obj in objects:
            await place(scheduler, obj)

    def run() -> float:
        started = time.process_time()
        loop.run_until_complete(feed())
        seconds = time.process_time() - started
        loop.run_until_complete(scheduler.close())
        loop.close()
        return seconds

    return run


def bound_updates(nodes: int, pods: int) -> Callable[[], float]:
    """A scheduler fed the nodes, the policy and `pods` pods bound to them, pending; the returned
    callable delivers each pod's Running status update as the bound pods' watch does, returning the
    seconds it took."""
    loop = asyncio.new_event_loop()
    scheduler, _ = fed_scheduler(loop, nodes)
    updates = []
    for index in range(pods):
        bound = pod_object(index, "another-scheduler")
        bound["spec"]["nodeName"] = f"node-{index % nodes}"
        scheduler.intake.on_bound_pod("ADDED", bound)
        updates.append(next_state(bound, status=running_status(bound["spec"])))

    def run() -> float:
        started = time.process_time()
        for update in updates:
            scheduler.intake.on_bound_pod("MODIFIED", update)
        seconds = time.process_time() - started
        loop.run_until_complete(scheduler.close())
        loop.close()
        return seconds

    return run


def full_collections(nodes: int, held: int) -> tuple[float, float]:
    """CPU ms of a full garbage collection on the scheduler's heap with `held` running pods, before
    and after `gc.freeze()` (what the operator does once its initial lists are in), min of 5."""
    run = cycle_burst(nodes, 1, held=held)

    def timed() -> float:
        best = float("inf")
        for _ in range(5):
            started = time.process_time()
            gc.collect()
            best = min(best, time.process_time() - started)
        return 1000 * best

    before = timed()
    gc.freeze()
    try:
        frozen = timed()
    finally:
        gc.unfreeze()
    run()  # the heap is held up to here; this closes its event loop
    return before, frozen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--cycle", action="store_true", help="measure the whole cycle per pod too")
    parser.add_argument("--bound", action="store_true", help="measure bound pods' Running updates alone")
    parser.add_argument("--shapes", default="", help=f"comma-separated, or all ({', '.join(ALL_SHAPES)})")
    parser.add_argument(
        "--held",
        type=int,
        help="running pods held for --cycle's gc row (default 10 a node, 10,000 at 1000 nodes; 10,000 on "
        "100 nodes leave the cycle's pods no room)",
    )
    args = parser.parse_args()
    held = 10 * args.nodes if args.held is None else args.held
    shapes = list(ALL_SHAPES) if args.shapes == "all" else list(filter(None, args.shapes.split(",")))
    if unknown := set(shapes) - set(ALL_SHAPES):
        parser.error(f"--shapes: no shape {', '.join(sorted(unknown))}; choose from {', '.join(ALL_SHAPES)}")
    if args.bound:
        per_update = 1e6 * min(bound_updates(args.nodes, args.pods)() for _ in range(3)) / args.pods
        print(f"{args.nodes} nodes, {args.pods} bound pods: {per_update:.1f} us per Running update")
        profiled = functools.partial(bound_updates, args.nodes, args.pods)
    elif shapes:
        for shape, ms in measure_shapes(args.nodes, args.pods, shapes).items():
            print(f"{args.nodes} nodes, {args.pods} pods, {shape}: {ms:.2f} ms per decision")
        profiled = functools.partial(burst, args.nodes, args.pods, shape=shapes[-1])
    else:
        for row in measure(args.nodes, args.pods):
            print(f"{args.nodes} nodes, {args.pods} pods, {row['variant']}: {row['ms_per_decision']:.2f} ms")
        if args.cycle:
            seconds = cycle_burst(args.nodes, args.pods)()
            print(f"{args.nodes} nodes, {args.pods} pods, whole cycle: {1000 * seconds / args.pods:.2f} ms")
            before, frozen = full_collections(args.nodes, held)
            print(
                f"{args.nodes} nodes, {held} pods held: a full collection {before:.1f} ms, "
                f"{frozen:.1f} ms after gc.freeze()"
            )
        profiled = functools.partial(cycle_burst if args.cycle else burst, args.nodes, args.pods)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(profiled())
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
