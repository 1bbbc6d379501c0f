"""`make bench-quiet`: what pods that fit nowhere cost the API server, promsched beside kube-scheduler.

    python -m bench.quiet [--nodes 100] [--pods 2000] [--park-minutes 10] [--sample-seconds 15]
                          [--schedulers promsched,ks-default] [--out bench/results] [--render]

One sandbox whose nodes all carry the taint PARK_TAINT, so a pod without its toleration fits nowhere.
After a baseline (the API server's write counters with no scheduler running), for each scheduler in turn,
started fresh in a namespace of its own that is deleted before the next:

1. create `--pods` pods naming the scheduler; each requests 1/k of a node's CPU (k = `Room.per_node`);
2. leave them parked `--park-minutes`, reading the API server's `apiserver_request_total` every
   `--sample-seconds`;
3. free room for half of them: remove the taint from `Room.nodes` nodes (kube-scheduler's queue moves
   the pods its TaintToleration plugin rejected on that node update); wait until that many are bound;
4. stop the scheduler, delete the namespace, taint the nodes again.

It reports writes per minute by verb and resource while parked, the Event objects created, the time from
freeing room to binding (median, max), and the bindings per second while the other half stays parked.
Results go to OUT/quiet.json, OUT/quiet.md and OUT/quiet.png (with matplotlib).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import asdict
from typing import Any

from bench import commanding, quiet_reporting
from bench.commanding import Report, report_line
from bench.facts import measured_on
from bench.loads import allocatable
from bench.quiet_parking import PARK_TAINT, measure_baseline, run_scheduler
from bench.quiet_runs import Settings, plan_room
from bench.requestcounts import per_minute, writes
from bench.sandboxing import prepare, stop_sandbox
from bench.variants import VARIANTS, apply_policy
from promsched.kube.configuring import from_kubeconfig
from promsched.sandbox import launching

# Both at kube-scheduler's default client budget (50/100): the writes they make are the measure.
_BY_KEY = {variant.key: variant for variant in VARIANTS}
SCHEDULERS = {
    "promsched": dataclasses.replace(_BY_KEY["promsched"], label="promsched (QPS 50/100)", qps=50, burst=100),
    "ks-default": _BY_KEY["ks-default"],
}


def _parse_args(argv: list[str] | None) -> Settings:
    parser = commanding.parser(__doc__)
    parser.add_argument("--nodes", type=int, default=100, help="sandbox nodes (default 100)")
    parser.add_argument("--pods", type=int, default=2000, help="pods that fit nowhere (default 2000)")
    parser.add_argument("--park-minutes", type=float, default=10.0, help="minutes parked (default 10)")
    parser.add_argument("--sample-seconds", type=float, default=15.0, help="between counter readings")
    parser.add_argument(
        "--baseline-seconds", type=float, default=60.0, help="counters read with no scheduler (default 60)"
    )
    parser.add_argument(
        "--free-timeout", type=float, default=300.0, help="seconds to wait for the freed pods' bindings"
    )
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=30.0,
        help="seconds counted after the last freed pod is bound, before the Events are counted (default 30)",
    )
    parser.add_argument(
        "--schedulers", default=",".join(SCHEDULERS), help="promsched,ks-default (in this order)"
    )
    commanding.add_output_flags(parser, "only rewrite quiet.md and quiet.png")
    args = parser.parse_args(argv)
    schedulers = commanding.chosen(parser, "--schedulers", args.schedulers, SCHEDULERS)
    if args.park_minutes <= 0 or args.sample_seconds <= 0:
        parser.error("--park-minutes and --sample-seconds must be positive")
    return Settings(
        nodes=args.nodes,
        pods=args.pods,
        park_minutes=args.park_minutes,
        sample_seconds=args.sample_seconds,
        baseline_seconds=args.baseline_seconds,
        free_timeout=args.free_timeout,
        settle_seconds=args.settle_seconds,
        schedulers=schedulers,
        out=args.out.resolve(),
        workdir=args.workdir,
        render=args.render,
    )


def bench_quiet(settings: Settings, report: Report) -> dict[str, Any]:
    names = [f"node-{i}" for i in range(settings.nodes)]
    room = plan_room(settings.pods, names, allocatable()[0])
    profiles = {name: {"taints": [PARK_TAINT]} for name in names}
    directory, profiles_file = prepare(settings.workdir, "quiet", settings.nodes, profiles)
    runs = []
    try:
        report(
            f"== {settings.nodes} nodes, all tainted {PARK_TAINT['key']}: starting a sandbox in {directory}"
        )
        sandbox = launching.up(directory, nodes=settings.nodes, profiles_file=profiles_file, report=report)
        credentials = from_kubeconfig(sandbox.kubeconfig)
        apply_policy(sandbox, "15s")
        report(f"  baseline: {settings.baseline_seconds:g} s of the API server's counters, no scheduler")
        grown, seconds = measure_baseline(credentials, settings.baseline_seconds)
        baseline = per_minute(writes(grown), seconds)
        for variant in settings.schedulers:
            runs.append(run_scheduler(sandbox, credentials, variant, room, settings, baseline, report))
    finally:
        report("== stopping the sandbox")
        stop_sandbox(directory, settings.out / "logs-quiet")
    return {
        "room": {**asdict(room), "nodes": len(room.nodes), "capacity": room.capacity},
        "baseline": {
            "seconds": seconds,
            "writes_per_minute": {k.label: v for k, v in sorted(baseline.items())},
        },
        "runs": runs,
    }


def measure(settings: Settings, argv: list[str] | None) -> dict[str, Any]:
    started = time.monotonic()
    results: dict[str, Any] = {
        "command": " ".join(["python -m bench.quiet", *(sys.argv[1:] if argv is None else argv)]),
        "settings": {
            **{
                k: v
                for k, v in asdict(settings).items()
                if k not in ("schedulers", "out", "workdir", "render")
            },
            "schedulers": [v.key for v in settings.schedulers],
            "taint": PARK_TAINT,
        },
        **measured_on(),
    }
    results.update(bench_quiet(settings, report_line))
    results["wall_s"] = time.monotonic() - started
    return results


def main(argv: list[str] | None = None) -> int:
    settings = _parse_args(argv)
    return commanding.run(
        settings.out,
        settings.render,
        "quiet.json",
        lambda: measure(settings, argv),
        lambda results: quiet_reporting.write(results, settings.out, report_line),
    )


if __name__ == "__main__":
    sys.exit(main())
