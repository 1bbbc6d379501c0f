"""The scheduling cycle alone, without a cluster: `decide()` for a burst of pods on N simulated nodes.

    python -m bench.decide_micro [--nodes 1000] [--pods 300] [--profile]

It builds the scheduler's cache from the same node objects the sandbox creates, a snapshot of the
benchmark's policy from the same skewed load profiles, and then decides and assumes pods one after
another, as `Scheduler.schedule_one` does. It reports CPU milliseconds per decision (process time: other
programs on a shared machine inflate wall time, not this) with Python's garbage collector as it is,
with the heap frozen after set-up (`gc.freeze()`), and with it disabled; `--profile` adds a cProfile
of the decisions. Use it to check a change to the hot path before the full benchmark.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import random
import time
from collections.abc import Callable

from bench.loads import skewed_profiles
from bench.pods import POD_CPU, POD_MEMORY
from bench.variants import policy_spec
from promsched.api.policies import parse_spec
from promsched.metrics import PluginSnapshot, Series, Snapshot, plan_from_policy
from promsched.sandbox.launching import node_manifest
from promsched.sandbox.profiles import LoadProfile, NodeSetup
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.deciding import DecisionMemo, decide
from promsched.scheduling.nodes import NodeInfo
from promsched.scheduling.pods import PodInfo

# Which profile field each built-in plugin reads.
PROFILE_FIELD = {
    "cpu": "cpu",
    "memory": "memory",
    "diskIO": "diskBusy",
    "diskSpace": "diskUsed",
    "network": "network",
}


def build(nodes: int, seed: int = 8) -> tuple[ClusterCache, Snapshot]:
    names = [f"node-{i}" for i in range(nodes)]
    profiles = skewed_profiles(names, seed + nodes)
    cache = ClusterCache()
    for index, name in enumerate(names):
        manifest = node_manifest(name, index, NodeSetup(LoadProfile()))
        status = manifest["status"]
        assert isinstance(status, dict)
        status["conditions"] = [{"type": "Ready", "status": "True"}]
        metadata = manifest["metadata"]
        assert isinstance(metadata, dict)
        metadata["resourceVersion"] = "1"
        cache.upsert_node(NodeInfo.from_object(manifest))
    plan = plan_from_policy(parse_spec(policy_spec("http://127.0.0.1:9090", "15s")))
    now = time.time()
    plugins = {}
    for plugin in plan.plugins:
        field = PROFILE_FIELD[plugin.name]
        series = {name: Series({}, profiles[name][field], now) for name in names}
        plugins[plugin.name] = PluginSnapshot(plugin, plugin.samples(series), series, refreshed_at=now)
    return cache, Snapshot(plan=plan, taken_at=now, plugins=plugins)


def pod(index: int) -> PodInfo:
    return PodInfo.from_object(
        {
            "metadata": {
                "name": f"p-{index}",
                "namespace": "bench",
                "uid": f"uid-{index}",
                "resourceVersion": "1",
            },
            "spec": {
                "schedulerName": "bench-promsched",
                "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": POD_CPU, "memory": POD_MEMORY}}}
                ],
            },
            "status": {"phase": "Pending"},
        }
    )


# ----- the measurement ----------------------------------------------------------------------------------


def burst(nodes: int, pods: int, chosen: list[str] | None = None) -> Callable[[], float]:
    """A fresh cache and snapshot; the returned callable decides and assumes `pods` pods, returning the
    seconds it took."""
    cache, snapshot = build(nodes)
    queue = [pod(i) for i in range(pods)]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for row in measure(args.nodes, args.pods):
        print(f"{args.nodes} nodes, {args.pods} pods, {row['variant']}: {row['ms_per_decision']:.2f} ms")
    if args.profile:
        run = burst(args.nodes, args.pods)
        profiler = cProfile.Profile()
        profiler.runcall(run)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
