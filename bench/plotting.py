"""Plots with matplotlib, when it is installed: loading it for files alone, and `make bench`'s plots per
node count (latency CDFs; throughput and CPU spread by variant)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.summaries import find, rows
from bench.variants import LABELS

MISSING = "matplotlib is not installed (pip install -e '.[bench]')"


def pyplot() -> Any:
    """matplotlib's pyplot drawing to files only (the Agg backend), or None when it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save(plt: Any, figure: Any, path: Path, *, tight: bool = True) -> str:
    """Write `figure` to `path` (laid out tightly unless `tight` is off), close it, and say so."""
    if tight:
        figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"wrote {path}"


def plots(results: dict[str, Any], out: Path) -> list[str]:
    """PNG plots per node count; returns what it did (or why not) as lines to print."""
    plt = pyplot()
    if plt is None:
        return [f"{MISSING}: no plots"]
    written = []
    for entry in results["node_counts"]:
        nodes = entry["nodes"]
        runs = entry["runs"]
        if not runs:
            continue
        figure, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
        for axis, mode in zip(axes, ("rate", "burst"), strict=True):
            for run in (r for r in rows(runs) if r["mode"] == mode):
                values = run["latencies_s"]
                if values:
                    fractions = [(i + 1) / len(values) for i in range(len(values))]
                    axis.plot([1000 * v for v in values], fractions, label=run["label"])
            axis.set_xscale("log")
            axis.set_xlabel("creation to binding (ms)")
            axis.set_title(f"{nodes} nodes, {mode}")
            axis.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("fraction of pods")
        for axis in axes:
            if axis.get_legend_handles_labels()[0]:
                axis.legend(fontsize=8)
        written.append(save(plt, figure, out / f"latency-cdf-{nodes}.png"))

        variants = list(dict.fromkeys(run["variant"] for run in runs))
        labels = [LABELS.get(v, v) for v in variants]
        figure, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        width = 0.38
        for offset, mode in ((-width / 2, "rate"), (width / 2, "burst")):
            picked = [find(results, nodes, v, mode) for v in variants]
            axes[0].bar(
                [i + offset for i in range(len(variants))],
                [run["throughput"] if run else 0 for run in picked],
                width,
                label=mode,
            )
            axes[1].bar(
                [i + offset for i in range(len(variants))],
                [run["spread"]["cpu_std"] if run else 0 for run in picked],
                width,
                label=mode,
            )
        axes[1].axhline(
            entry["baseline_spread"]["cpu_std"], color="grey", linestyle="--", label="profiles alone"
        )
        for axis, title in zip(
            axes, ("throughput (pods bound/s)", "CPU utilisation std over nodes (%)"), strict=True
        ):
            axis.set_xticks(range(len(variants)), labels, rotation=12, fontsize=8)
            axis.set_title(f"{nodes} nodes: {title}")
            axis.legend(fontsize=8)
            axis.grid(True, axis="y", alpha=0.3)
        written.append(save(plt, figure, out / f"throughput-spread-{nodes}.png"))
    return written
