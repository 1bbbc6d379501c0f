"""The memory the scheduler holds for N nodes and P running pods, without a cluster.

    python -m bench.memory_micro [--nodes 1000] [--pods 10000] [--top 12] [--other]

It feeds a Scheduler the sandbox's node objects and the benchmark's policy, then each of P benchmark pods
through the entry points the watch uses and the cycle that places it, as `bench.decide_micro --cycle`
does: `Intake.on_event` with the pod as the API server returns it (pending), `schedule_one` (decision,
record, binding sent to a sender that answers at once), then the bound pod and the kubelet's (kwok's)
running status. What scheduling leaves is thus held too: placements, decision records, version guards.
`--other` feeds the pods as bound by another scheduler instead (no decisions).

Each part runs in a process of its own, so none inherits another's heap:
- rss: VmRSS (/proc/self/status) before the nodes, after them, after the pods and after a full
  collection, with VmHWM, the peak; per node and per pod.
- sites: tracemalloc's live allocations after the pods less those after the nodes, by the file and by the
  line of promsched (or bench) code that made them (the innermost such frame: a dataclass's generated
  __init__ or a dict comprehension is charged to the line that called it).
- kopf: Kopf's own memory per watched object: `ResourceMemories.recall` for P pod bodies with a memo like
  the operator's, as Kopf's processing does for every object until its deletion.
- workers: what P pods waiting for a node hold through Kopf's real watch path (`tests.support.
  kopf_watching`, each pod added pending) one second after their events were handled, with Kopf's own
  per-object worker idle timeout and with promsched's (`wiring.KOPF_WORKER_IDLE_SECONDS`): Kopf keeps a
  worker per object until it has been idle that long.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import subprocess
import sys
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

from bench.decide_micro import (
    add_nodes_and_policy,
    bench_scheduler,
    fed_scheduler,
    next_state,
    place,
    pod_object,
    running_status,
)
from promsched.scheduling.intake.kinds import PODS

PARTS = ("rss", "sites", "kopf", "workers")
# Frames of these files are never charged: they allocate on behalf of the code that called them.
_PASS_THROUGH = ("<string>", "<frozen", "/dataclasses.py", "/functools.py", "/typing.py")


def rss_kib(field: str = "VmRSS") -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


class Cluster:
    """A scheduler with the benchmark's policy, fed nodes and then pods as the watch delivers them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.scheduler = bench_scheduler()
        self.scheduler_name = ""

    def add_nodes(self, nodes: int) -> None:
        self.scheduler_name = add_nodes_and_policy(self.loop, self.scheduler, nodes)

    def add_pods(self, first: int, stop: int, *, other: bool = False) -> None:
        """Pods `first` to `stop` placed and running: by this scheduler's cycle, or (`other`) bound by
        another."""
        nodes = len(self.scheduler.cache.nodes)
        scheduler = self.scheduler

        async def feed() -> None:
            for index in range(first, stop):
                if not other:
                    await place(scheduler, pod_object(index, self.scheduler_name))
                    continue
                obj = pod_object(index, "another-scheduler")
                scheduler.intake.on_event(PODS, "ADDED", obj)
                bound = next_state(obj, spec=obj["spec"] | {"nodeName": f"node-{index % nodes}"})
                scheduler.intake.on_event(PODS, "MODIFIED", bound)
                scheduler.intake.on_event(
                    PODS, "MODIFIED", next_state(bound, status=running_status(bound["spec"]))
                )
            assert len(scheduler.cache.counted) == stop

        self.loop.run_until_complete(feed())

    def close(self) -> None:
        self.loop.run_until_complete(self.scheduler.close())
        self.loop.close()


# ----- the parts ------------------------------------------------------------------------------------


def measure_rss(nodes: int, pods: int, other: bool) -> dict[str, float]:
    gc.collect()
    cluster = Cluster()
    before = rss_kib()
    cluster.add_nodes(nodes)
    gc.collect()
    with_nodes = rss_kib()
    half = pods // 2
    cluster.add_pods(0, half, other=other)
    gc.collect()
    with_half = rss_kib()
    cluster.add_pods(half, pods, other=other)
    gc.collect()
    with_pods = rss_kib()
    figures = {
        "base_mib": before / 1024,
        "nodes_mib": (with_nodes - before) / 1024,
        "pods_mib": (with_pods - with_nodes) / 1024,
        "rss_mib": with_pods / 1024,
        "peak_mib": rss_kib("VmHWM") / 1024,
        "bytes_per_node": 1024 * (with_nodes - before) / nodes,
        "bytes_per_pod": 1024 * (with_pods - with_nodes) / pods,
        "bytes_per_more_pod": 1024 * (with_pods - with_half) / (pods - half),
    }
    cluster.close()
    return figures


def _charged(traceback: tracemalloc.Traceback) -> tracemalloc.Frame:
    """The innermost frame of promsched's code, else the innermost that is not a pass-through (the
    traceback runs from the oldest frame)."""
    frames = list(reversed(traceback))
    for frame in frames:
        if "/promsched/" in frame.filename:
            return frame
    for frame in frames:
        if not frame.filename.startswith(_PASS_THROUGH) and not frame.filename.endswith(_PASS_THROUGH):
            return frame
    return frames[0]


def _short(filename: str) -> str:
    for marker in ("/promsched/", "/site-packages/", "/bench/", "/lib/python3"):
        if marker in filename:
            return (
                filename.split(marker, 1)[1]
                if marker != "/bench/"
                else "bench/" + filename.split(marker, 1)[1]
            )
    return filename


def held_by_site(snapshot: tracemalloc.Snapshot) -> tuple[Counter[str], Counter[str]]:
    """Live bytes by file and by line, each charged to `_charged`'s frame."""
    by_file: Counter[str] = Counter()
    by_line: Counter[str] = Counter()
    for trace in snapshot.traces:
        frame = _charged(trace.traceback)
        name = _short(frame.filename)
        by_file[name] += trace.size
        by_line[f"{name}:{frame.lineno}"] += trace.size
    return by_file, by_line


def measure_sites(nodes: int, pods: int, other: bool) -> tuple[Counter[str], Counter[str]]:
    """Bytes held by file and by line for the second half of `pods`: the live allocations after all of
    them less those after the first half, so what is held once (per node, per policy) is left out."""
    cluster = Cluster()
    cluster.add_nodes(nodes)
    cluster.add_pods(0, pods // 2, other=other)
    tracemalloc.start(12)
    gc.collect()
    files_before, lines_before = held_by_site(tracemalloc.take_snapshot())
    cluster.add_pods(pods // 2, pods, other=other)
    gc.collect()
    files_after, lines_after = held_by_site(tracemalloc.take_snapshot())
    tracemalloc.stop()
    cluster.close()
    files_after.subtract(files_before)
    lines_after.subtract(lines_before)
    return files_after, lines_after


def measure_kopf(pods: int) -> float:
    """Bytes Kopf keeps per watched pod: its ResourceMemory, with a shallow copy of the memo."""
    import kopf
    from kopf._core.reactor.inventory import ResourceMemories

    memobase: Any = kopf.Memo()
    memobase.runtime = object()  # the operator's memo holds one attribute, its Runtime
    bodies: list[Any] = [pod_object(index, "bench-promsched") for index in range(pods)]
    memories = ResourceMemories()

    async def recall_all() -> None:
        for body in bodies:
            await memories.recall(body, memobase=memobase, noticed_by_listing=True)

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    asyncio.run(recall_all())
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    # Only what recall allocated: the bodies were built before, and asyncio.run's loop is gone.
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert len(memories._items) == pods
    return grown / pods


def measure_workers(pods: int, idle_timeout: float) -> tuple[float, int]:
    """Bytes held per pending pod, and the tasks alive, one second after Kopf handled P pods' ADDED
    events with workers that end after `idle_timeout` idle seconds (the scheduler's own queue included)."""
    from tests.support.kopf_watching import watch  # Kopf with it, before tracing starts

    loop = asyncio.new_event_loop()
    scheduler, scheduler_name = fed_scheduler(loop, 100)
    events = [{"type": "ADDED", "object": pod_object(index, scheduler_name)} for index in range(pods)]
    held: list[tuple[int, int]] = []

    async def after_a_second() -> None:
        await asyncio.sleep(1.0)
        gc.collect()
        held.append((tracemalloc.get_traced_memory()[0], len(asyncio.all_tasks())))

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    loop.run_until_complete(watch(scheduler, events, idle_timeout=idle_timeout, then=after_a_second))
    tracemalloc.stop()
    loop.run_until_complete(scheduler.close())
    loop.close()
    [(traced, tasks)] = held
    return (traced - before) / pods, tasks


def run_part(args: argparse.Namespace) -> None:
    part, nodes, pods, other, top = args.part, args.nodes, args.pods, args.other, args.top
    if part == "rss":
        f = measure_rss(nodes, pods, other)
        print(
            f"rss: {nodes} nodes, {pods} pods: base {f['base_mib']:.1f} MiB, "
            f"nodes +{f['nodes_mib']:.1f} MiB ({f['bytes_per_node']:.0f} B/node), "
            f"pods +{f['pods_mib']:.1f} MiB ({f['bytes_per_pod']:.0f} B/pod, "
            f"the second half {f['bytes_per_more_pod']:.0f} B/pod), VmRSS {f['rss_mib']:.1f} MiB, "
            f"VmHWM {f['peak_mib']:.1f} MiB"
        )
    elif part == "sites":
        sampled = min(pods, args.site_pods)
        by_file, by_line = measure_sites(nodes, sampled, other)
        more = sampled - sampled // 2
        held = sum(by_file.values()) / more
        print(f"sites: bytes held per pod {held:.0f} (tracemalloc, pods {sampled // 2} to {sampled})")
        for title, counts in (("by file", by_file), ("by line", by_line)):
            print(f"  {title}:")
            for name, size in counts.most_common(top):
                print(f"    {size / more:8.0f} B/pod  {name}")
    elif part == "kopf":
        print(f"kopf: ResourceMemories.recall keeps {measure_kopf(pods):.0f} B per pod")
    else:
        import kopf  # here, so the other parts' processes do not load it

        from promsched.operating.wiring import KOPF_WORKER_IDLE_SECONDS

        for label, idle in (
            ("Kopf's", kopf.OperatorSettings().queueing.idle_timeout),
            ("promsched's", KOPF_WORKER_IDLE_SECONDS),
        ):
            per_pod, tasks = measure_workers(pods, idle)
            print(
                f"workers: {pods} pending pods, {label} idle timeout {idle:g} s: {per_pod:.0f} B per pod "
                f"held a second after their events, {tasks} tasks alive"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--top", type=int, default=12, help="sites shown")
    parser.add_argument(
        "--site-pods", type=int, default=2000, help="pods for the sites part (tracemalloc is slow)"
    )
    parser.add_argument("--other", action="store_true", help="pods bound by another scheduler")
    parser.add_argument("--part", choices=PARTS, help="run one part here (the others run it in a child)")
    args = parser.parse_args()
    if args.part is not None:
        run_part(args)
        return
    for part in PARTS:
        command = [sys.executable, "-m", "bench.memory_micro", "--part", part, "--nodes", str(args.nodes)]
        command += ["--pods", str(args.pods), "--top", str(args.top), "--site-pods", str(args.site_pods)]
        subprocess.run(command + (["--other"] if args.other else []), check=True)


if __name__ == "__main__":
    main()
