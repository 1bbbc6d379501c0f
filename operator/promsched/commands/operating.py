"""The operator's commands: run the scheduler, print its CRD, convert a kube-scheduler configuration."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from promsched.commands.options import cluster_options, env_option


class Positive(click.ParamType[float]):
    """A number above 0, or an error naming kube-scheduler's default."""

    def __init__(self, kind: Callable[[str], float], what: str, default: str) -> None:
        self.kind, self.what, self.default = kind, what, default
        self.name = "NUMBER" if kind is float else "INTEGER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if not isinstance(value, str):
            return float(value) if self.kind is float else value  # a default
        try:
            number = self.kind(value)
        except ValueError:
            number = 0
        if not (number > 0 and math.isfinite(number)):
            self.fail(
                f"must be {self.what} above 0, not {value!r} (kube-scheduler's default: {self.default})",
                param,
                ctx,
            )
        return number


class GoDuration(click.ParamType[float]):
    """A Go duration above 0 (5m, 90s, 1m30s), in seconds."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from promsched.api.fields import parse_duration

        if isinstance(value, float):
            return value
        try:
            seconds = parse_duration(str(value), "the duration")
        except ValueError as error:
            self.fail(str(error), param, ctx)
        if seconds <= 0:
            self.fail(f"must be above 0, e.g. 5m, not {value!r}", param, ctx)
        return seconds


@click.command()
@cluster_options
@click.option("--namespace", multiple=True, help="schedule only pods of this namespace (repeat for more)")
@env_option(
    "--listen",
    env="PROMSCHED_LISTEN",
    default="127.0.0.1:8080",
    show_default=True,
    help="/metrics and probes",
)
@click.option("--leader-elect", is_flag=True, help="run as one of several replicas")
@env_option("--lease-namespace", env="POD_NAMESPACE", default="default", show_default=True)
@click.option("--lease-name", default="promsched", show_default=True)
@env_option(
    "--allowed-prometheus-hosts",
    env="PROMSCHED_ALLOWED_PROMETHEUS_HOSTS",
    help="comma-separated hosts a policy may point at (default: any)",
)
@click.option(
    "--watch-inactivity-timeout",
    type=float,
    default=70.0,
    help="seconds of silence (no event, no bookmark) after which a watch is re-opened (default 70)",
)
@click.option(
    "--resync-interval",
    type=float,
    default=300.0,
    help="seconds between lists of every watched kind that compare the cache with the cluster and "
    "repair it (promsched_cache_drift_total counts what they find); 0: never (default 300)",
)
@click.option(
    "--kube-api-qps",
    type=Positive(float, "a number", "50"),
    default=50.0,
    help="requests per second to the API server, after a burst (kube-scheduler's flag; default 50); "
    "bindings go first when requests wait",
)
@click.option(
    "--kube-api-burst",
    type=Positive(int, "a whole number", "100"),
    default=100,
    help="requests sent at once before --kube-api-qps applies (kube-scheduler's flag; default 100)",
)
@click.option(
    "--pod-max-in-unschedulable-pods-duration",
    type=GoDuration(),
    default=300.0,
    help="how long a pod that fits nowhere waits for a cluster event that may help it before it is "
    "tried again anyway, e.g. 5m (kube-scheduler's flag and default: 5m)",
)
@click.option(
    "--bind-timeout-seconds",
    type=Positive(int, "a whole number", "600"),
    default=600,
    metavar="SECONDS",
    help="how long a pod's WaitForFirstConsumer claims may take to be bound or provisioned on the chosen "
    "node before the pod is tried again (kube-scheduler's VolumeBinding bindTimeoutSeconds; default 600)",
)
@click.option(
    "--rebalance-evictions/--no-rebalance-evictions",
    default=True,
    help="the kill switch of every policy's spec.rebalance: with --no-rebalance-evictions, Enforce "
    "runs as DryRun (reports what it would move, evicts nothing)",
)
@env_option(
    "--log-level",
    env="PROMSCHED_LOG_LEVEL",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
)
def run(**options: Any) -> int:
    """Run the scheduler (a Kopf operator)."""
    from promsched.operating.wiring import RunOptions, configure_logging
    from promsched.operating.wiring import run as run_operator

    configure_logging(options["log_level"])
    hosts = options["allowed_prometheus_hosts"]
    run_operator(
        RunOptions(
            kubeconfig=options["kubeconfig"],
            context=options["context"],
            namespaces=tuple(options["namespace"]),
            listen=options["listen"],
            leader_elect=options["leader_elect"],
            lease_namespace=options["lease_namespace"],
            lease_name=options["lease_name"],
            allowed_prometheus_hosts=frozenset(h for h in hosts.split(",") if h)
            if hosts is not None
            else None,
            watch_inactivity_timeout=options["watch_inactivity_timeout"],
            resync_interval=options["resync_interval"],
            max_unschedulable_seconds=options["pod_max_in_unschedulable_pods_duration"],
            bind_timeout=float(options["bind_timeout_seconds"]),
            rebalance_evictions=options["rebalance_evictions"],
            kube_api_qps=options["kube_api_qps"],
            kube_api_burst=options["kube_api_burst"],
        )
    )
    return 0


@click.command()
def crd() -> int:
    """Print the SchedulingPolicy CustomResourceDefinition."""
    from promsched.api.crds import render_crd_yaml

    sys.stdout.write(render_crd_yaml())
    return 0


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def convert(file: Path) -> int:
    """Turn a KubeSchedulerConfiguration using the original Go plugins into SchedulingPolicies."""
    import yaml

    from promsched.api.converting import convert_file

    result = convert_file(file)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    sys.stdout.write(yaml.safe_dump_all(result.policies, sort_keys=False))
    return 0


OPERATOR_COMMANDS = (run, crd, convert)
