"""Kopf's CPU per pod watch event, without a cluster: its watcher, worker and handler machinery.

    python -m bench.kopf_micro [--nodes 100] [--pods 1000] [--rounds 5] [--profile]

Each pod brings the three watch events a scheduled pod brings (added pending, bound, running as the
kubelet reports it), in a burst's order (all added, then all bound, then all running), to a scheduler
fed the nodes and the benchmark's policy (bench.decide_micro). Two ways, interleaved, each round on a
fresh scheduler:

- direct: the events handed to `Intake.on_event`, the scheduler's own work;
- kopf: the events through Kopf's real path with the settings, logging and handlers promsched's
  startup installs (`tests.support.kopf_watching`, which the wiring's unit test drives too): the watch
  stream (infinite_watch, continuous_watch, watch_objs) over a fake API stream of parsed events, the
  watcher multiplexing them to per-pod workers, process_resource_event, cause detection and handler
  invocation, then promsched's handler of pods. Each event is yielded once the previous one was handled,
  as events trickle in from the API server. Each pod's worker ends after
  `wiring.KOPF_WORKER_IDLE_SECONDS` without events (a later event starts another) or when the watcher
  does.

It reports CPU microseconds per event (process time, min over the rounds) of both and their
difference, Kopf's own; `--profile` adds a cProfile of one kopf round. The JSON parsing of the stream's
lines and aiohttp's reads are not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import pstats
import time
from typing import Any

from tests.support.kopf_watching import watch

from bench.decide_micro import fed_scheduler, next_state, pod_object, running_status
from promsched.operating import wiring
from promsched.scheduling.intake.kinds import PODS
from promsched.scheduling.schedulers import Scheduler


def pod_events(pods: int, nodes: int, scheduler_name: str) -> list[dict[str, Any]]:
    """The watch events of a burst: every pod added pending, then each bound to a node, then each
    running."""
    pending = [pod_object(index, scheduler_name) for index in range(pods)]
    bound = [
        next_state(obj, spec=obj["spec"] | {"nodeName": f"node-{index % nodes}"})
        for index, obj in enumerate(pending)
    ]
    running = [next_state(obj, status=running_status(obj["spec"])) for obj in bound]
    return [
        *({"type": "ADDED", "object": obj} for obj in pending),
        *({"type": "MODIFIED", "object": obj} for obj in bound + running),
    ]


def direct(scheduler: Scheduler, events: list[dict[str, Any]]) -> float:
    started = time.process_time()
    for event in events:
        scheduler.intake.on_event(PODS, event["type"], event["object"])
    return time.process_time() - started


def through_kopf(
    scheduler: Scheduler, events: list[dict[str, Any]], loop: asyncio.AbstractEventLoop
) -> float:
    started = time.process_time()
    loop.run_until_complete(watch(scheduler, events))
    return time.process_time() - started


def round_of(way: str, nodes: int, pods: int, profiler: cProfile.Profile | None = None) -> float:
    """CPU seconds per event of one way on a fresh scheduler."""
    loop = asyncio.new_event_loop()
    scheduler, scheduler_name = fed_scheduler(loop, nodes)
    events = pod_events(pods, nodes, scheduler_name)
    if profiler is not None:
        profiler.enable()
    seconds = direct(scheduler, events) if way == "direct" else through_kopf(scheduler, events, loop)
    if profiler is not None:
        profiler.disable()
    loop.run_until_complete(scheduler.close())
    loop.close()
    return seconds / len(events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    wiring.configure_logging("INFO")  # promsched run's default
    logging.getLogger("promsched").setLevel(logging.WARNING)  # the fake set-up's own notes
    best = {"direct": float("inf"), "kopf": float("inf")}
    for _ in range(args.rounds):
        for way in best:
            best[way] = min(best[way], round_of(way, args.nodes, args.pods))
    print(
        f"{args.nodes} nodes, {args.pods} pods, {3 * args.pods} events, CPU us per event, min of "
        f"{args.rounds}: direct {1e6 * best['direct']:.1f}, through kopf {1e6 * best['kopf']:.1f}, "
        f"kopf's own {1e6 * (best['kopf'] - best['direct']):.1f}"
    )
    if args.profile:
        profiler = cProfile.Profile()
        round_of("kopf", args.nodes, args.pods, profiler)
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
