"""What the two benches that replay a seeded trace on the closed-loop sandbox share: `make bench-quality`
(bench.quality) and `make bench-rebalance` (bench.rebalance_proof). Their settings and flags, the nodes'
background loads, the one main that measures (or, with --render, reads the stored results) and the one
way results are written: OUT/NAME.json, the markdown report OUT/NAME.md and the plots."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import commanding
from bench.commanding import Results
from bench.loads import skewed_profiles
from bench.quality_trace import TraceSettings
from bench.reporting import sanitize

# Background loads: bench.loads' right-skewed profiles, CPU and memory scaled down so that the
# trace's usage on top of them leaves a mean node below the hot thresholds (a scheduler can then avoid
# hot nodes, and whether it does is the measure).
BACKGROUND_SCALE = {"cpu": 0.6, "memory": 0.7}


def background_profiles(names: list[str], seed: int) -> dict[str, dict[str, float]]:
    profiles = skewed_profiles(names, seed)
    for profile in profiles.values():
        for key, scale in BACKGROUND_SCALE.items():
            profile[key] = round(profile[key] * scale, 1)
    return profiles


@dataclass(frozen=True)
class Settings:
    """A trace bench's settings; each bench adds its own fields."""

    trace: TraceSettings
    step: float
    history: float
    clear_timeout: float
    out: Path
    workdir: Path | None
    render: bool


def parser(
    doc: str | None, nodes: int, minutes: float, seed: int, render_help: str
) -> argparse.ArgumentParser:
    """The flags both benches take, with this bench's defaults; the bench adds its own."""
    parser = commanding.parser(doc)
    parser.add_argument("--nodes", type=int, default=nodes)
    parser.add_argument("--minutes", type=float, default=minutes, help=f"trace length (default {minutes:g})")
    parser.add_argument("--seed", type=int, default=seed)
    parser.add_argument(
        "--requested", type=float, default=0.70, help="share of the cluster's CPU requested at the end"
    )
    parser.add_argument("--step", type=float, default=5.0, help="seconds between measured samples")
    parser.add_argument("--history", type=float, default=600.0, help="seconds of backfilled metrics")
    parser.add_argument("--clear-timeout", type=float, default=300.0)
    commanding.add_output_flags(parser, render_help)
    return parser


def settings_of(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    services_ramp: float = TraceSettings.services_ramp,
    scale_until: float = TraceSettings.scale_until,
) -> dict[str, Any]:
    """The shared settings from parsed flags, with the trace's services arriving over `services_ramp` and
    growing until `scale_until` (shares of the trace), as keyword arguments for the bench's Settings; a
    trace the flags cannot make is a usage error."""
    try:
        trace = TraceSettings(
            nodes=args.nodes,
            minutes=args.minutes,
            seed=args.seed,
            requested_at_end=args.requested,
            services_ramp=services_ramp,
            scale_until=scale_until,
        )
    except ValueError as error:
        parser.error(str(error))
    return {
        "trace": trace,
        "step": args.step,
        "history": args.history,
        "clear_timeout": args.clear_timeout,
        "out": args.out.resolve(),
        "workdir": args.workdir,
        "render": args.render,
    }


@dataclass(frozen=True)
class Output:
    """How a bench writes its results: OUT/`name`.json with `judged` (the issue's targets, reported, not
    asserted) stored under `judged_key`, OUT/`name`.md from `markdown`, and the plots `plots` draws."""

    name: str
    judged_key: str
    judged: Callable[[Results], object]
    markdown: Callable[[Results], str]
    plots: Callable[[Results, Path], list[str]]


def write(results: Results, out: Path, output: Output, plots_too: bool) -> str:
    """Write the results and their report (and, with `plots_too`, the plots); returns the report."""
    results[output.judged_key] = output.judged(results)
    (out / f"{output.name}.json").write_text(json.dumps(sanitize(results), indent=1, allow_nan=False))
    text = output.markdown(results)
    (out / f"{output.name}.md").write_text(text)
    if plots_too:
        for line in output.plots(results, out):
            print(line)
    return text


def main(settings: Settings, output: Output, measure: Callable[[], Results]) -> int:
    """Measure (or, with --render, read OUT/NAME.json back), write everything and print the report."""
    return commanding.run(
        settings.out,
        settings.render,
        f"{output.name}.json",
        measure,
        lambda results: write(results, settings.out, output, plots_too=True),
    )
