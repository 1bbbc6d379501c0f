"""`make bench`: promsched side by side with kube-scheduler and a null binder, on one sandbox per node count.

    python -m bench.benchmark [--nodes 100,1000] [--pods 500] [--rate 50] [--out bench/results]
                              [--modes rate,burst] [--variants promsched,ks-default,ks-raised,null]
                              [--repeats 3] [--big-burst 5000,10000] [--profile [burst|rate]] [--micro]
                              [--merge] [--render]

For each node count it starts a sandbox (kwok nodes with skewed load profiles, simulated metrics for all)
and runs, one after another and each in a namespace of its own that is deleted before the next run, each
row `--repeats` times interleaved (every variant and mode once, then again; reported as medians and ranges):

- promsched: `promsched run` with one SchedulingPolicy of the five built-in plugins;
- kube-scheduler of the sandbox's Kubernetes release, at its default client QPS/burst (50/100) and raised
  (1000/2000);
- the null binder (`bench/nullbinder.py`): promsched's client stack binding round-robin, no filtering or
  scoring: the API server's limit on this machine.

Each of them gets the same pods at a fixed arrival rate and as a burst. It measures throughput, latency
from creation to binding, Prometheus queries per pod, the scheduler's CPU and peak RSS, the API server's
CPU per binding, and the spread of node utilisation (the load profile plus the placed pods' requests).
Results go to OUT/results.json, OUT/results.md and OUT/*.png (with matplotlib).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench import commanding, reporting
from bench.commanding import Report, report_line
from bench.facts import measured_on, revision
from bench.loads import skewed_profiles, utilisation_spread
from bench.plotting import plots
from bench.pods import POD_CPU, POD_MEMORY, SHAPES
from bench.running import MODES, run_once
from bench.sandboxing import prepare, stop_sandbox, yield_cpu
from bench.targets import targets
from bench.variants import MAKE_BENCH_VARIANTS, VARIANTS, Variant, apply_policy
from promsched.kube.configuring import from_kubeconfig
from promsched.kube.credentials import Credentials
from promsched.kube.sending import ApiError
from promsched.sandbox import launching
from promsched.sandbox.control_plane.clusters import Sandbox, SandboxError

# The run before the counted ones at each node count (`_warm_up`): pods, at most --pods.
WARMUP_PODS = 100


@dataclass(frozen=True)
class Settings:
    node_counts: tuple[int, ...]
    pods: int
    rate: float
    modes: tuple[str, ...]
    variants: tuple[Variant, ...]
    out: Path
    refresh: str
    history: float
    big_bursts: tuple[int, ...]
    profile: str | None  # the mode of the extra run under py-spy
    seed: int
    workdir: Path | None
    merge: bool
    render: bool
    micro: bool
    repeats: int = 3
    warmup_pods: int = WARMUP_PODS  # at most `pods`; 0: no warm-up run
    shape: str = "plain"  # the pods' (bench.pods.SHAPES)
    sandbox_nice: int = 0  # the sandbox's processes' niceness; the schedulers keep 0
    # How often the sandbox's Prometheus scrapes and evaluates its rules: as kube-prometheus-stack does.
    scrape_seconds: float = commanding.DEPLOYED_SCRAPE_SECONDS


def bench_nodes(nodes: int, settings: Settings, report: Report) -> dict[str, Any]:
    started = time.monotonic()
    profiles = skewed_profiles([f"node-{i}" for i in range(nodes)], settings.seed + nodes)
    directory, profiles_file = prepare(settings.workdir, "bench", nodes, profiles)
    runs: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    profile_file: Path | None = None
    try:
        report(f"== {nodes} nodes: starting a sandbox in {directory}")
        sandbox = launching.up(
            directory,
            nodes=nodes,
            profiles_file=profiles_file,
            history=settings.history,
            report=report,
            scrape_seconds=settings.scrape_seconds,
        )
        up_seconds = time.monotonic() - started
        if settings.sandbox_nice:
            reniced = yield_cpu(directory, settings.sandbox_nice)
            report(f"  at nice {settings.sandbox_nice}: {', '.join(reniced)}")
        credentials = from_kubeconfig(sandbox.kubeconfig)
        if settings.warmup_pods:
            _warm_up(sandbox, credentials, nodes, settings, profiles, report)
        # Interleaved (every variant and mode once, then again): a slow spell of the shared machine falls
        # on one repeat of several rows, not on every repeat of one; the report takes medians.
        for repeat in range(settings.repeats):
            for variant in settings.variants:
                if variant.kind == "promsched":
                    apply_policy(sandbox, settings.refresh, nodes, variant)
                for mode in settings.modes:
                    report(f"  repeat {repeat + 1}/{settings.repeats}")
                    runs.append(
                        run_once(
                            sandbox,
                            credentials,
                            variant,
                            mode,
                            settings.pods,
                            settings.rate,
                            profiles,
                            report,
                            repeat=repeat,
                            shape=settings.shape,
                        )
                    )
        if nodes <= 1000 and nodes == max(n for n in settings.node_counts if n <= 1000):
            counts = settings.big_bursts or ((settings.pods,) if settings.profile is not None else ())
            if counts:
                apply_policy(sandbox, settings.refresh, nodes)
            for index, count in enumerate(counts):
                # py-spy on the first big burst only: the others measure peak RSS undisturbed.
                profiled = settings.profile is not None and index == 0
                if profiled:
                    profile_file = settings.out / f"profile-promsched-{nodes}.txt"
                try:
                    extra.append(
                        run_once(
                            sandbox,
                            credentials,
                            VARIANTS[0],
                            (settings.profile or "burst") if profiled else "burst",
                            count,
                            settings.rate,
                            profiles,
                            report,
                            profile_file if profiled else None,
                            shape=settings.shape,
                        )
                    )
                except (SandboxError, ApiError, aiohttp.ClientError, TimeoutError) as error:
                    # An extra run that fails must not take the repeated runs' results with it.
                    report(f"  the extra burst of {count} pods failed: {type(error).__name__}: {error}")
    finally:
        report(f"== {nodes} nodes: stopping the sandbox")
        stop_sandbox(directory, settings.out / f"logs-{nodes}")
    baseline = utilisation_spread(profiles, {})
    return {
        "nodes": nodes,
        "runs": runs,
        "extra_runs": extra,
        "baseline_spread": baseline,
        "sandbox_up_s": up_seconds,
        "wall_s": time.monotonic() - started,
        "profile_file": str(profile_file) if profile_file else None,
        "profile_mode": settings.profile,
    }


def _warm_up(
    sandbox: Sandbox,
    credentials: Credentials,
    nodes: int,
    settings: Settings,
    profiles: dict[str, dict[str, float]],
    report: Report,
) -> None:
    """A run of the first variant and mode, not counted: a fresh sandbox's first run is its slowest for
    any scheduler (the API server, etcd and kwok warming up), and the first variant's would pay for it
    alone. In the stored results its p99 was 1.11x the median of its row's later repeats (median over 54
    invocations; 0.96x for the other rows' first repeats)."""
    variant = settings.variants[0]
    if variant.kind == "promsched":
        apply_policy(sandbox, settings.refresh, nodes, variant)
    pods = settings.warmup_pods
    report(f"  warm-up: {variant.label} {settings.modes[0]} {pods} pods, not counted")
    run_once(
        sandbox,
        credentials,
        variant,
        settings.modes[0],
        pods,
        settings.rate,
        profiles,
        report,
        repeat=-1,
        shape=settings.shape,
    )


# ----- entry point --------------------------------------------------------------------------------------


def _parse_args(argv: list[str] | None) -> Settings:
    parser = commanding.parser(__doc__)
    parser.add_argument(
        "--nodes",
        default=os.environ.get("BENCH_NODES", "100,1000"),
        help="comma-separated node counts (default $BENCH_NODES or 100,1000)",
    )
    parser.add_argument("--pods", type=int, default=500, help="pods per run (default 500)")
    parser.add_argument("--rate", type=float, default=50.0, help="arrival rate of the rate runs, pods/s")
    parser.add_argument("--modes", default=",".join(MODES), help="rate,burst")
    parser.add_argument(
        "--variants",
        default=",".join(MAKE_BENCH_VARIANTS),
        help=f"{','.join(MAKE_BENCH_VARIANTS)} (default); promsched-rules reads the node mixin's rules; "
        "promsched-baseline runs the promsched package in $PROMSCHED_BENCH_BASELINE (another commit's "
        "operator/)",
    )
    parser.add_argument("--refresh", default="15s", help="the policy's refreshInterval (default 15s)")
    parser.add_argument("--history", type=float, default=300.0, help="seconds of backfilled metrics")
    parser.add_argument(
        "--big-burst",
        default="",
        help="also promsched-only bursts of these many pods (comma-separated, e.g. 5000,10000) at the "
        "largest node count <= 1000 (peak RSS)",
    )
    parser.add_argument(
        "--profile",
        nargs="?",
        const="burst",
        choices=list(MODES),
        help="py-spy on the first extra promsched run, of this mode (default burst; rate: at --rate pods/s)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs of each variant and mode, interleaved; the report gives medians and ranges (default 3)",
    )
    parser.add_argument(
        "--warmup-pods",
        type=int,
        default=WARMUP_PODS,
        help=f"pods of the run before the counted ones at each node count (at most --pods; 0: none; "
        f"default {WARMUP_PODS})",
    )
    parser.add_argument(
        "--shape",
        default="plain",
        choices=list(SHAPES),
        help="the pods' placement rules (bench.pods.SHAPES; default plain, as make bench runs)",
    )
    parser.add_argument(
        "--sandbox-nice",
        type=int,
        default=0,
        help="run the sandbox's processes (API server, etcd, kwok, Prometheus) at this niceness, the "
        "schedulers at 0: on cores they share, 10 stands for schedulers on cores of their own (default 0)",
    )
    commanding.add_scrape_interval(
        parser, commanding.DEPLOYED_SCRAPE_SECONDS, "the sandbox Prometheus's scrapes and rule evaluations"
    )
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the results of other node counts already in OUT/results.json (e.g. to add 5000 nodes)",
    )
    parser.add_argument(
        "--micro",
        action="store_true",
        help="also time the decision alone offline (bench/decide_micro.py) at each node count",
    )
    commanding.add_output_flags(
        parser, "only rewrite results.md and the plots from OUT/results.json", sandboxes="the sandboxes go"
    )
    args = parser.parse_args(argv)
    variants = commanding.chosen(parser, "--variants", args.variants, {v.key: v for v in VARIANTS})
    modes = tuple(mode for mode in args.modes.split(",") if mode)
    if set(modes) - set(MODES):
        parser.error(f"--modes: use {', '.join(MODES)}")
    for variant in variants:
        if variant.source_env and not os.environ.get(variant.source_env):
            parser.error(f"--variants {variant.key}: set {variant.source_env} to a folder holding promsched")
    if args.repeats < 1:
        parser.error("--repeats: at least 1")
    if args.warmup_pods < 0:
        parser.error("--warmup-pods: 0 or more")
    return Settings(
        node_counts=tuple(int(n) for n in args.nodes.split(",") if n),
        pods=args.pods,
        rate=args.rate,
        modes=modes,
        variants=variants,
        out=args.out.resolve(),
        refresh=args.refresh,
        history=args.history,
        big_bursts=tuple(int(n) for n in args.big_burst.split(",") if n),
        profile=args.profile,
        shape=args.shape,
        sandbox_nice=args.sandbox_nice,
        scrape_seconds=args.scrape_interval,
        seed=args.seed,
        workdir=args.workdir,
        merge=args.merge,
        render=args.render,
        micro=args.micro,
        repeats=args.repeats,
        warmup_pods=min(args.warmup_pods, args.pods),
    )


def measure(settings: Settings, argv: list[str] | None) -> dict[str, Any]:
    """Every node count in turn (results.json rewritten after each), then the offline decision timings."""
    started = time.monotonic()
    facts = measured_on()
    invocation = {
        "argv": sys.argv[1:] if argv is None else argv,
        "started": facts["started"],
        "node_counts": list(settings.node_counts),
        "wall_s": 0.0,
        # What each variant with a source of its own ran: the checkout holding its operator/.
        "sources": {
            v.key: {"folder": os.environ[v.source_env], **revision(Path(os.environ[v.source_env]).parent)}
            for v in settings.variants
            if v.source_env
        },
    }
    results: dict[str, Any] = {
        "settings": {
            **{
                k: v
                for k, v in asdict(settings).items()
                if k not in ("out", "variants", "workdir", "merge", "render", "micro")
            },
            "variants": [asdict(v) for v in settings.variants],
            "pod_requests": {"cpu": POD_CPU, "memory": POD_MEMORY},
        },
        **facts,
        "invocations": [invocation],
        "node_counts": [],
    }
    previous = settings.out / "results.json"
    if settings.merge and previous.exists():
        # Keep the earlier results of the node counts this invocation does not run.
        earlier = json.loads(previous.read_text())
        results = {**earlier, "invocations": [*earlier.get("invocations", []), invocation]}
        results["node_counts"] = [e for e in earlier["node_counts"] if e["nodes"] not in settings.node_counts]
    for nodes in settings.node_counts:
        entry = bench_nodes(nodes, settings, report_line)
        entry["settings"] = {
            "pods": settings.pods,
            "rate": settings.rate,
            "modes": list(settings.modes),
            "variants": [v.key for v in settings.variants],
            "refresh": settings.refresh,
            "big_bursts": list(settings.big_bursts),
            "repeats": settings.repeats,
            "sandbox_nice": settings.sandbox_nice,
            "scrape_seconds": settings.scrape_seconds,
            "revision": revision(),
        }
        results["node_counts"].append(entry)
        results["node_counts"].sort(key=lambda e: e["nodes"])
        invocation["wall_s"] = time.monotonic() - started
        _write(results, settings.out, plots_too=False)
    if settings.micro:
        results["micro"] = _micro(sorted({e["nodes"] for e in results["node_counts"]}))
    invocation["wall_s"] = time.monotonic() - started
    return results


def main(argv: list[str] | None = None) -> int:
    settings = _parse_args(argv)

    def write(results: dict[str, Any]) -> str:
        if settings.render and settings.micro:  # --render --micro: the stored runs, fresh offline timings
            results["micro"] = _micro(sorted({e["nodes"] for e in results["node_counts"]}))
        return _write(results, settings.out, plots_too=True)

    return commanding.run(
        settings.out, settings.render, "results.json", lambda: measure(settings, argv), write
    )


MICRO_PODS_PER_NODE = 10


def _micro(node_counts: list[int]) -> list[dict[str, object]]:
    """`bench.decide_micro` at each node count: the decision alone, offline, and the fix prototypes."""
    from bench import decide_micro

    rows = []
    for nodes in node_counts:
        # A burst that fits: every pod must find a node, and a node takes 39 of make bench's 100m pods.
        pods = min(300 if nodes <= 1000 else 100, MICRO_PODS_PER_NODE * nodes)
        report_line(f"== the decision alone, offline: {nodes} nodes, {pods} pods")
        rows += decide_micro.measure(nodes, pods)
    return rows


def _write(results: dict[str, Any], out: Path, plots_too: bool) -> str:
    results["targets"] = targets(results)
    document = reporting.sanitize(results)
    (out / "results.json").write_text(json.dumps(document, indent=1, default=_json_default, allow_nan=False))
    earlier = out / "before" / "results.json"
    before = json.loads(earlier.read_text()) if earlier.exists() else None
    markdown = reporting.markdown(results, before)
    (out / "results.md").write_text(markdown)
    if plots_too:
        for line in plots(results, out):
            report_line(line)
    return markdown


def _json_default(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not serialisable: {value!r}")


if __name__ == "__main__":
    sys.exit(main())
