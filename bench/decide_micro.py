"""The scheduling cycle alone, without a cluster: `decide()` for a burst of pods on N simulated nodes.

    python -m bench.decide_micro [--nodes 1000] [--pods 300] [--profile]

It builds the scheduler's cache from the same node objects the sandbox creates, a snapshot of the
benchmark's policy from the same skewed load profiles, and then decides and assumes pods one after
another, as `Scheduler.schedule_one` does. It reports milliseconds per decision with Python's garbage
collector as it is, with the heap frozen after set-up (`gc.freeze()`), and with it disabled; `--profile`
adds a cProfile of the decisions. Use it to check a change to the hot path before the full benchmark.

It also measures two prototypes of the fixes the profile calls for (recommendations for the owners of
`metrics/scoring.py` and `scheduling/deciding.py`; they are patched in here only, never in the package),
and checks that they choose exactly the same nodes:

- lean scoring: the load total of every node computed from per-snapshot precomputed sums, only the herd
  adjusted plugins recomputed, and no `PluginResult`/`NodeResult` breakdown built per node and pod (a real
  change would build the breakdown for the few top nodes shown in the decision);
- herd over placed nodes: `herd_adjustments` looks only at nodes with recent placements instead of asking
  the cache about every feasible node.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import pstats
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from bench.benchmark import POD_CPU, POD_MEMORY, policy_spec, skewed_profiles
from promsched.api.policies import BuiltinPlugin, OnMissingMetrics, parse_spec
from promsched.metrics import PluginSnapshot, Series, Snapshot, plan_from_policy
from promsched.metrics.plugins import Plugin
from promsched.metrics.samples import Sample
from promsched.metrics.scoring import NEUTRAL_SCORE, FilterReason, NodeResult
from promsched.sandbox.launching import node_manifest
from promsched.sandbox.profiles import LoadProfile, NodeSetup
from promsched.scheduling import deciding
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.deciding import decide
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


# ----- prototypes of the fixes --------------------------------------------------------------------------

_Base = tuple[float, int, tuple[FilterReason, ...]]
_prepared: dict[int, tuple[Snapshot, float, dict[str, _Base]]] = {}


def _prepare(snapshot: Snapshot, fresh_since: float) -> dict[str, _Base]:
    """Per node: the weighted score sum, the weight that counts and the filter reasons, from the snapshot
    alone. Valid while no sample turns stale, which this prototype checks by the oldest sample time."""
    key = id(snapshot)
    cached = _prepared.get(key)
    if cached is not None and cached[0] is snapshot and cached[1] <= fresh_since:
        oldest = min(
            (s.sample_time for p in snapshot.plugins.values() for s in p.samples.values()), default=0.0
        )
        if oldest >= fresh_since:
            return cached[2]
    plan = snapshot.plan
    missing_score = NEUTRAL_SCORE if plan.on_missing is OnMissingMetrics.NEUTRAL else None
    filter_missing = plan.on_missing is OnMissingMetrics.UNSCHEDULABLE
    nodes = {node for p in snapshot.plugins.values() for node in p.samples}
    base: dict[str, _Base] = {}
    for node in nodes:
        weighted, weights, reasons = 0.0, 0, []
        for plugin_snapshot in snapshot.plugins.values():
            plugin = plugin_snapshot.plugin
            sample = plugin_snapshot.samples.get(node)
            if sample is None or sample.sample_time < fresh_since:
                if missing_score is not None:
                    weighted += plugin.weight * missing_score
                    weights += plugin.weight
                elif filter_missing:
                    state = "no sample" if sample is None else "a stale sample"
                    reasons.append(FilterReason(f"{plugin.name} metrics missing", f"{node}: {state}"))
                continue
            weighted += plugin.weight * sample.score
            weights += plugin.weight
            if sample.over_threshold:
                reasons.append(
                    FilterReason(plugin.threshold_reason, f"{node} {plugin.describe(sample.value)}")
                )
        base[node] = (weighted, weights, tuple(reasons))
    _prepared.clear()
    _prepared[key] = (snapshot, fresh_since, base)
    return base


def lean_score_nodes(
    snapshot: Snapshot,
    nodes: Iterable[str],
    *,
    now: float | None = None,
    extra_load: Mapping[str, Mapping[str, float]] | None = None,
) -> list[NodeResult]:
    """`score_nodes` with the same totals and reasons, without the per-plugin breakdown."""
    plan = snapshot.plan
    fresh_since = (time.time() if now is None else now) - plan.stale_after_seconds
    base = _prepare(snapshot, fresh_since)
    adjustable: dict[str, tuple[Plugin, Mapping[str, Sample]]] = {
        name: (p.plugin, p.samples) for name, p in snapshot.plugins.items()
    }
    neutral: _Base = (0.0, 0, ())
    results = []
    for node in nodes:
        weighted, weights, reasons = base.get(node, neutral)
        extra = extra_load.get(node) if extra_load else None
        if extra:
            for name, added in extra.items():
                entry = adjustable.get(name)
                if entry is None or not added:
                    continue
                plugin, samples = entry
                sample = samples.get(node)
                if sample is None or sample.sample_time < fresh_since:
                    continue
                loaded = plugin.with_extra_load(sample, added)
                weighted += plugin.weight * (loaded.score - sample.score)
                if loaded.over_threshold and not sample.over_threshold:
                    detail = f"{node} {plugin.describe(loaded.value)}"
                    reasons = (*reasons, FilterReason(plugin.threshold_reason, detail))
        total = weighted / weights if weights else NEUTRAL_SCORE
        results.append(NodeResult(node, total, (), reasons))
    return results


def herd_over_placed_nodes(
    cache: ClusterCache, snapshot: Snapshot, nodes: list[str]
) -> dict[str, dict[str, float]]:
    """`herd_adjustments` from the nodes with placements after the snapshot only (the others add
    nothing); entries for nodes not in `nodes` are never looked up."""
    if not any(name in snapshot.plugins for name in (BuiltinPlugin.CPU, BuiltinPlugin.MEMORY)):
        return {}
    adjustments = {}
    for node, placements in cache.placements.items():
        if placements and placements[-1].at > snapshot.taken_at:
            cpu, memory = cache.recent_load_percent(node, snapshot.taken_at)
            if cpu or memory:
                adjustments[node] = {BuiltinPlugin.CPU.value: cpu, BuiltinPlugin.MEMORY.value: memory}
    return adjustments


@contextlib.contextmanager
def patched(lean: bool, herd: bool) -> Iterator[None]:
    original = {name: getattr(deciding, name) for name in ("score_nodes", "herd_adjustments")}
    if lean:
        setattr(deciding, "score_nodes", lean_score_nodes)  # noqa: B010 (not an exported name)
    if herd:
        setattr(deciding, "herd_adjustments", herd_over_placed_nodes)  # noqa: B010
    try:
        yield
    finally:
        for name, function in original.items():
            setattr(deciding, name, function)


# ----- the measurement ----------------------------------------------------------------------------------


def burst(nodes: int, pods: int, chosen: list[str] | None = None) -> Callable[[], float]:
    """A fresh cache and snapshot; the returned callable decides and assumes `pods` pods, returning the
    seconds it took."""
    cache, snapshot = build(nodes)
    queue = [pod(i) for i in range(pods)]
    rng = random.Random(1)

    def run() -> float:
        started = time.perf_counter()
        for item in queue:
            outcome = decide(item, cache, snapshot, rng=rng)
            assert outcome.node is not None
            cache.assume(item, outcome.node)
            if chosen is not None:
                chosen.append(outcome.node)
        return time.perf_counter() - started

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    nothing: Callable[[], None] = lambda: None  # noqa: E731
    settings: tuple[tuple[str, Callable[[], None], Callable[[], None]], ...] = (
        ("gc as is", nothing, nothing),
        ("gc.freeze() after set-up", gc.freeze, gc.unfreeze),
        ("gc disabled", gc.disable, gc.enable),
    )
    for label, before, after in settings:
        run = burst(args.nodes, args.pods)
        gc.collect()
        before()
        seconds = run()
        after()
        print(
            f"{args.nodes} nodes, {args.pods} pods, {label}: {1000 * seconds / args.pods:.2f} ms per decision"
        )
    reference: list[str] = []
    burst(args.nodes, args.pods, reference)()
    for label, lean, herd in (
        ("prototype: lean scoring", True, False),
        ("prototype: herd over placed nodes", False, True),
        ("prototype: both", True, True),
    ):
        chosen: list[str] = []
        with patched(lean, herd):
            run = burst(args.nodes, args.pods, chosen)
            seconds = run()
        same = "same nodes chosen" if chosen == reference else "DIFFERENT nodes chosen"
        print(f"{args.nodes} nodes, {args.pods} pods, {label}: {1000 * seconds / args.pods:.2f} ms ({same})")
    if args.profile:
        run = burst(args.nodes, args.pods)
        profiler = cProfile.Profile()
        profiler.runcall(run)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
