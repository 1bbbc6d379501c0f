"""What the benches' entry points share: their common flags, their report to stderr, and one main that
measures anew (or, with --render, reads the stored results) and prints the markdown it writes."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any, Final, TypeVar

from promsched.sandbox.node_metrics.monitoring import SCRAPE_SECONDS

REPO = Path(__file__).resolve().parents[1]
Report = Callable[[str], None]
Results = dict[str, Any]
Chosen = TypeVar("Chosen")


def report_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def terminate(signum: int, _frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C, so that a stopped bench still stops its sandbox in its `finally`."""
    raise KeyboardInterrupt(f"signal {signum}")


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser whose --help is the entry point's docstring, as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)


def add_output_flags(
    parser: argparse.ArgumentParser, render_help: str, sandboxes: str = "the sandbox goes"
) -> None:
    """--out (where results go), --workdir (where the sandbox goes) and --render (only rewrite the report)."""
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--workdir", type=Path, help=f"where {sandboxes} (default: the temp dir)")
    parser.add_argument("--render", action="store_true", help=render_help)


# kube-prometheus-stack scrapes node_exporter and evaluates the node mixin's rules every 30 s; the sandbox
# does both every SCRAPE_SECONDS so that tests see a change within seconds.
DEPLOYED_SCRAPE_SECONDS: Final = 30.0


def add_scrape_interval(parser: argparse.ArgumentParser, default: float, what: str) -> None:
    """--scrape-interval: seconds between the samples of each series (`what` they are), `default` unless
    given."""
    parser.add_argument(
        "--scrape-interval",
        type=float,
        default=default,
        help=f"seconds between {what} (default {default:g}; the sandbox's tests run at {SCRAPE_SECONDS:g}, "
        f"kube-prometheus-stack at {DEPLOYED_SCRAPE_SECONDS:g})",
    )


def chosen(
    parser: argparse.ArgumentParser, flag: str, keys: str, known: Mapping[str, Chosen]
) -> tuple[Chosen, ...]:
    """The comma-separated `keys` looked up in `known`, in the order given; an unknown key is a usage
    error."""
    wanted = [key for key in keys.split(",") if key]
    unknown = [key for key in wanted if key not in known]
    if unknown:
        parser.error(f"{flag}: {', '.join(unknown)} unknown; use {', '.join(known)}")
    return tuple(known[key] for key in wanted)


def run(
    out: Path,
    render: bool,
    stored: str,
    measure: Callable[[], Results],
    write: Callable[[Results], str],
) -> int:
    """Measure (or, with `render`, read OUT/`stored` back), write the results and print their markdown."""
    signal.signal(signal.SIGTERM, terminate)
    out.mkdir(parents=True, exist_ok=True)
    results: Results = json.loads((out / stored).read_text()) if render else measure()
    print(write(results))
    return 0
