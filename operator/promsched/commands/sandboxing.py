"""The development sandbox's commands and the demo, on `promsched` only (not the kubectl plugin)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from promsched.commands.options import env_option, show

sandbox_dir = env_option(
    "--dir",
    "directory",
    env="PROMSCHED_SANDBOX_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".sandbox"),
    show_default=True,
    help="the sandbox's folder",
)


@click.group()
def sandbox() -> None:
    """A local control plane with simulated nodes and Prometheus."""


@sandbox.command()
@click.option(
    "--with",
    "extras",
    multiple=True,
    type=click.Choice(["trimaran", "victoriametrics"]),
    help="also build an optional component: trimaran (kube-scheduler with the scheduler-plugins "
    "Trimaran plugins, the peer `make bench-quality` measures against), victoriametrics "
    "(VictoriaMetrics single-node and vmalert, for `sandbox up --metrics victoriametrics`)",
)
@click.option(
    "--only",
    type=click.Choice(["demo"]),
    help="build only what `promsched sandbox up` and `promsched demo` run: etcd, kube-apiserver, "
    "kube-controller-manager, kubectl, kwok, Prometheus and node_exporter (not helm nor "
    "kube-scheduler, which the tests and benchmarks use)",
)
def install(extras: tuple[str, ...], only: str | None) -> int:
    """Build or install the pinned components."""
    from promsched.sandbox.builds import installing
    from promsched.sandbox.builds.components import SANDBOX_UP_BINARIES

    installing.install(only=SANDBOX_UP_BINARIES if only == "demo" else None)
    if "trimaran" in extras:
        installing.install_trimaran()
    if "victoriametrics" in extras:
        installing.install_victoriametrics()
    return 0


@sandbox.command()
@click.option(
    "--context",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    help="the repository's root (default: this folder)",
)
def image(context: Path) -> int:
    """Build the Dockerfile with buildah (no Docker daemon) into promsched's container storage; prints
    the image's reference with its digest."""
    from promsched.sandbox.builds import imaging

    return show(imaging.build(context).reference)


@sandbox.command()
@sandbox_dir
@click.option("--nodes", type=int, default=6, show_default=True, help="simulated nodes")
@click.option(
    "--profiles", type=click.Path(dir_okay=False, path_type=Path), help="YAML load profiles per node"
)
@click.option(
    "--history-minutes", type=float, help="metric history to backfill (default 65, or 10 above 100 nodes)"
)
@click.option(
    "--reuse",
    is_flag=True,
    help="if a sandbox is already up in --dir with every component running, use it as it is",
)
@click.option(
    "--metrics",
    type=click.Choice(["prometheus", "victoriametrics"]),
    default="prometheus",
    show_default=True,
    help="the metrics backend behind PROMETHEUS_URL: victoriametrics is VictoriaMetrics single-node "
    "scraping the same exporters, with vmalert recording the same rules (docs/metrics-backends.md)",
)
def up(
    directory: Path,
    nodes: int,
    profiles: Path | None,
    history_minutes: float | None,
    reuse: bool,
    metrics: str,
) -> int:
    """Start a sandbox."""
    from promsched.sandbox import launching

    history = None if history_minutes is None else history_minutes * 60.0
    started = launching.up(
        directory, nodes=nodes, profiles_file=profiles, history=history, reuse=reuse, metrics=(metrics,)
    )
    show(f"export KUBECONFIG={started.kubeconfig}")
    show(f"export PROMETHEUS_URL={started.prometheus_url}")
    return show(f"export PATH={started.state.bin_dir}:$PATH")


@sandbox.command()
@sandbox_dir
def status(directory: Path) -> int:
    """Each component's state."""
    from promsched.operating.tables import table
    from promsched.sandbox import launching

    rows = launching.status(directory)
    states = [
        [row.name, "running" if row.running else ("dead" if row.pid else "not started"), str(row.pid or "")]
        for row in rows
    ]
    show(table(states, header=False))
    return 0 if all(row.running for row in rows) else 1


@sandbox.command()
@sandbox_dir
def down(directory: Path) -> int:
    """Stop every sandbox process."""
    from promsched.sandbox import launching

    launching.down(directory)
    return 0


@sandbox.command()
@sandbox_dir
@click.argument("node")
@click.option("--cpu", type=float, help="CPU busy percent")
@click.option("--memory", type=float, help="memory used percent")
@click.option("--disk-busy", type=float, help="disk I/O busy percent")
@click.option("--disk-used", type=float, help="filesystem used percent")
@click.option("--network", type=float, help="eth0 receive+transmit bytes per second")
def load(directory: Path, node: str, **changes: Any) -> int:
    """Change a simulated node's load profile."""
    from promsched.sandbox.control_plane.clusters import Sandbox

    given = {key: value for key, value in changes.items() if value is not None}
    if not given:
        raise click.UsageError("give at least one of --cpu, --memory, --disk-busy, --disk-used, --network")
    profile = Sandbox.load(directory).set_load(node, **given)
    return show(" ".join(f"{key}={value:g}" for key, value in profile.items()))


@click.command()
@sandbox_dir
def demo(directory: Path) -> int:
    """Place a sample workload on a running sandbox and show why."""
    from promsched.sandbox.demoing import demo as run_demo

    run_demo(directory)
    return 0


SANDBOX_COMMANDS = (sandbox, demo)
