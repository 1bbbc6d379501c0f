"""The `promsched` command line."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from promsched import __version__

Command = Callable[[argparse.Namespace], int]
# `-o` of explain and score: the human table (default), or the same facts as a document.
OUTPUT_FORMATS = ("table", "json", "yaml")
# What the sandbox needs beyond a plain install (the `sandbox` extra).
SANDBOX_EXTRA_MODULES = frozenset({"cryptography"})


def _sandbox_install(args: argparse.Namespace) -> int:
    from promsched.sandbox.builds import installing
    from promsched.sandbox.builds.components import SANDBOX_UP_BINARIES

    installing.install(only=SANDBOX_UP_BINARIES if args.only == "demo" else None)
    if "trimaran" in args.extras:
        installing.install_trimaran()
    return 0


def _sandbox_image(args: argparse.Namespace) -> int:
    from promsched.sandbox.builds import imaging

    image = imaging.build(args.context)
    print(image.reference)
    return 0


def _sandbox_up(args: argparse.Namespace) -> int:
    from promsched.sandbox import launching

    history = None if args.history_minutes is None else args.history_minutes * 60.0
    sandbox = launching.up(
        args.dir, nodes=args.nodes, profiles_file=args.profiles, history=history, reuse=args.reuse
    )
    print(f"export KUBECONFIG={sandbox.kubeconfig}")
    print(f"export PROMETHEUS_URL={sandbox.prometheus_url}")
    print(f"export PATH={sandbox.state.bin_dir}:$PATH")
    return 0


def _sandbox_status(args: argparse.Namespace) -> int:
    from promsched.sandbox import launching

    rows = launching.status(args.dir)
    width = max(len(row.name) for row in rows)
    for row in rows:
        state = "running" if row.running else ("dead" if row.pid else "not started")
        print(f"{row.name:<{width}}  {state:<11}  {row.pid or ''}")
    return 0 if all(row.running for row in rows) else 1


def _sandbox_down(args: argparse.Namespace) -> int:
    from promsched.sandbox import launching

    launching.down(args.dir)
    return 0


def _sandbox_load(args: argparse.Namespace) -> int:
    from promsched.sandbox.control_plane.clusters import Sandbox

    changes = {key: getattr(args, key) for key in ("cpu", "memory", "disk_busy", "disk_used", "network")}
    given = {key: value for key, value in changes.items() if value is not None}
    if not given:
        print("give at least one of --cpu, --memory, --disk-busy, --disk-used, --network", file=sys.stderr)
        return 2
    profile = Sandbox.load(args.dir).set_load(args.node, **given)
    print(" ".join(f"{key}={value:g}" for key, value in profile.items()))
    return 0


def _crd(_args: argparse.Namespace) -> int:
    from promsched.api.crds import render_crd_yaml

    sys.stdout.write(render_crd_yaml())
    return 0


def _convert(args: argparse.Namespace) -> int:
    import yaml

    from promsched.api.converting import convert_file

    result = convert_file(args.file)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    sys.stdout.write(yaml.safe_dump_all(result.policies, sort_keys=False))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from promsched.sandbox.demoing import demo

    demo(args.dir)
    return 0


def _explain(args: argparse.Namespace) -> int:
    import asyncio

    from promsched.operating.inspecting import explain_pod

    print(asyncio.run(explain_pod(args.kubeconfig, args.pod, context=args.context, output=args.output)))
    return 0


def _score(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from promsched.operating.inspecting import score_policy

    # Failed queries are listed in the output; the metrics layer's warnings would only repeat them.
    logging.basicConfig(level=logging.ERROR)
    print(
        asyncio.run(
            score_policy(
                args.kubeconfig,
                args.policy,
                args.pod,
                args.prometheus_url,
                context=args.context,
                output=args.output,
            )
        )
    )
    return 0


def _cluster_options() -> argparse.ArgumentParser:
    """What every command that talks to a cluster takes, as kubectl does."""
    cluster = argparse.ArgumentParser(add_help=False)
    cluster.add_argument(
        "--kubeconfig",
        type=Path,
        help="default: $KUBECONFIG (files joined with ':' are merged), in-cluster, ~/.kube/config",
    )
    cluster.add_argument("--context", help="the kubeconfig context to use (default: its current-context)")
    return cluster


def _inspect_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = _cluster_options()
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument(
        "-o",
        "--output",
        choices=OUTPUT_FORMATS,
        default="table",
        help="table (default), or json or yaml for scripts",
    )
    explain = commands.add_parser(
        "explain",
        parents=[cluster, output],
        help="why promsched placed a pod where it did: its recorded decision",
    )
    explain.add_argument("pod", metavar="NAMESPACE/POD", help="the pod (NAME alone: the context's namespace)")
    explain.set_defaults(run=_explain)
    score = commands.add_parser(
        "score",
        parents=[cluster, output],
        help="dry run: how a policy file ranks the live cluster's nodes now (binds nothing)",
    )
    score.add_argument("--policy", type=Path, required=True, help="a SchedulingPolicy YAML file")
    score.add_argument(
        "--pod", type=Path, help="a Pod, or a workload with spec.template (default: a pod with no requests)"
    )
    score.add_argument(
        "--prometheus-url", help="query this Prometheus instead of the policy's (e.g. a port-forward)"
    )
    score.set_defaults(run=_score)


def _run(args: argparse.Namespace) -> int:
    from promsched.operating.wiring import RunOptions, configure_logging, run

    configure_logging(args.log_level)
    hosts = args.allowed_prometheus_hosts
    run(
        RunOptions(
            kubeconfig=args.kubeconfig,
            context=args.context,
            namespaces=tuple(args.namespace),
            listen=args.listen,
            leader_elect=args.leader_elect,
            lease_namespace=args.lease_namespace,
            lease_name=args.lease_name,
            allowed_prometheus_hosts=frozenset(h for h in hosts.split(",") if h)
            if hosts is not None
            else None,
            watch_inactivity_timeout=args.watch_inactivity_timeout,
            resync_interval=args.resync_interval,
            max_unschedulable_seconds=args.pod_max_in_unschedulable_pods_duration,
            bind_timeout=float(args.bind_timeout_seconds),
            rebalance_evictions=args.rebalance_evictions,
            kube_api_qps=args.kube_api_qps,
            kube_api_burst=args.kube_api_burst,
        )
    )
    return 0


def _duration(text: str) -> float:
    """An argparse type: a Go duration above 0 (5m, 90s, 1m30s), in seconds."""
    from promsched.api.fields import parse_duration

    try:
        seconds = parse_duration(text, "the duration")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, e.g. 5m, not {text!r}")
    return seconds


def _positive(kind: Callable[[str], float], what: str, default: str) -> Callable[[str], float]:
    """An argparse type: `what` above 0, or an error naming kube-scheduler's default."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(
                f"must be {what} above 0, not {text!r} (kube-scheduler's default: {default})"
            )
        return value

    return parse


def _run_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = os.environ.get
    run = commands.add_parser("run", parents=[_cluster_options()], help="run the scheduler (a Kopf operator)")
    run.add_argument("--namespace", action="append", default=[], help="schedule only pods of this namespace")
    run.add_argument(
        "--listen", default=env("PROMSCHED_LISTEN", "127.0.0.1:8080"), help="/metrics and probes"
    )
    run.add_argument("--leader-elect", action="store_true", help="run as one of several replicas")
    run.add_argument("--lease-namespace", default=env("POD_NAMESPACE", "default"))
    run.add_argument("--lease-name", default="promsched")
    run.add_argument(
        "--allowed-prometheus-hosts",
        default=env("PROMSCHED_ALLOWED_PROMETHEUS_HOSTS"),
        help="comma-separated hosts a policy may point at (default: any)",
    )
    run.add_argument(
        "--watch-inactivity-timeout",
        type=float,
        default=70.0,
        help="seconds of silence (no event, no bookmark) after which a watch is re-opened (default 70)",
    )
    run.add_argument(
        "--resync-interval",
        type=float,
        default=300.0,
        help="seconds between lists of every watched kind that compare the cache with the cluster and "
        "repair it (promsched_cache_drift_total counts what they find); 0: never (default 300)",
    )
    run.add_argument(
        "--kube-api-qps",
        type=_positive(float, "a number", "50"),
        default=50.0,
        help="requests per second to the API server, after a burst (kube-scheduler's flag; default 50); "
        "bindings go first when requests wait",
    )
    run.add_argument(
        "--kube-api-burst",
        type=_positive(int, "a whole number", "100"),
        default=100,
        help="requests sent at once before --kube-api-qps applies (kube-scheduler's flag; default 100)",
    )
    run.add_argument(
        "--pod-max-in-unschedulable-pods-duration",
        type=_duration,
        default=300.0,
        metavar="DURATION",
        help="how long a pod that fits nowhere waits for a cluster event that may help it before it is "
        "tried again anyway, e.g. 5m (kube-scheduler's flag and default: 5m)",
    )
    run.add_argument(
        "--bind-timeout-seconds",
        type=_positive(int, "a whole number", "600"),
        default=600,
        metavar="SECONDS",
        help="how long a pod's WaitForFirstConsumer claims may take to be bound or provisioned on the chosen "
        "node before the pod is tried again (kube-scheduler's VolumeBinding bindTimeoutSeconds; default 600)",
    )
    run.add_argument(
        "--rebalance-evictions",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the kill switch of every policy's spec.rebalance: with --no-rebalance-evictions, Enforce "
        "runs as DryRun (reports what it would move, evicts nothing)",
    )
    run.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    run.set_defaults(run=_run)


def _sandbox_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sandbox = commands.add_parser("sandbox", help="a local control plane with simulated nodes and Prometheus")
    actions = sandbox.add_subparsers(dest="action", required=True)
    directory = argparse.ArgumentParser(add_help=False)
    directory.add_argument(
        "--dir", type=Path, default=Path(".sandbox"), help="sandbox folder (default .sandbox)"
    )

    install = actions.add_parser("install", help="build or install the pinned components")
    install.add_argument(
        "--with",
        dest="extras",
        action="append",
        default=[],
        choices=["trimaran"],
        help="also build an optional component: trimaran (kube-scheduler with the scheduler-plugins "
        "Trimaran plugins, the peer `make bench-quality` measures against)",
    )
    install.add_argument(
        "--only",
        choices=["demo"],
        help="build only what `promsched sandbox up` and `promsched demo` run: etcd, kube-apiserver, "
        "kube-controller-manager, kubectl, kwok, Prometheus and node_exporter (not helm nor "
        "kube-scheduler, which the tests and benchmarks use)",
    )
    install.set_defaults(run=_sandbox_install)
    image = actions.add_parser(
        "image",
        help="build the Dockerfile with buildah (no Docker daemon) into promsched's container storage; "
        "prints the image's reference with its digest",
    )
    image.add_argument(
        "--context", type=Path, default=Path("."), help="the repository's root (default: this folder)"
    )
    image.set_defaults(run=_sandbox_image)
    start = actions.add_parser("up", parents=[directory], help="start a sandbox")
    start.add_argument("--nodes", type=int, default=6, help="simulated nodes (default 6)")
    start.add_argument("--profiles", type=Path, help="YAML load profiles per node")
    start.add_argument(
        "--history-minutes", type=float, help="metric history to backfill (default 65, or 10 above 100 nodes)"
    )
    start.add_argument(
        "--reuse",
        action="store_true",
        help="if a sandbox is already up in --dir with every component running, use it as it is",
    )
    start.set_defaults(run=_sandbox_up)
    actions.add_parser("status", parents=[directory], help="each component's state").set_defaults(
        run=_sandbox_status
    )
    actions.add_parser("down", parents=[directory], help="stop every sandbox process").set_defaults(
        run=_sandbox_down
    )
    load = actions.add_parser("load", parents=[directory], help="change a simulated node's load profile")
    load.add_argument("node")
    load.add_argument("--cpu", type=float, help="CPU busy percent")
    load.add_argument("--memory", type=float, help="memory used percent")
    load.add_argument("--disk-busy", type=float, help="disk I/O busy percent")
    load.add_argument("--disk-used", type=float, help="filesystem used percent")
    load.add_argument("--network", type=float, help="eth0 receive+transmit bytes per second")
    load.set_defaults(run=_sandbox_load)


def build_parser(prog: str = "promsched") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="A load-aware Kubernetes scheduler.")
    parser.add_argument("--version", action="version", version=f"promsched {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    _run_parser(commands)
    demo = commands.add_parser("demo", help="place a sample workload on a running sandbox and show why")
    demo.add_argument("--dir", type=Path, default=Path(".sandbox"), help="sandbox folder (default .sandbox)")
    demo.set_defaults(run=_demo)
    _inspect_parsers(commands)
    _sandbox_parser(commands)
    commands.add_parser("crd", help="print the SchedulingPolicy CustomResourceDefinition").set_defaults(
        run=_crd
    )
    convert = commands.add_parser(
        "convert",
        help="turn a KubeSchedulerConfiguration using the original Go plugins into SchedulingPolicies",
    )
    convert.add_argument("file", type=Path)
    convert.set_defaults(run=_convert)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "promsched") -> int:
    from promsched.api.converting import ConversionError
    from promsched.kube.credentials import CredentialsError
    from promsched.operating.inspections import InspectError
    from promsched.operating.listening import StartupError
    from promsched.sandbox.builds.imaging import ImageError
    from promsched.sandbox.builds.installing import InstallError
    from promsched.sandbox.control_plane.clusters import SandboxError
    from promsched.sandbox.node_metrics.profiles import ProfileError

    args = build_parser(prog).parse_args(argv)
    run: Command = args.run
    try:
        return run(args)
    except (
        SandboxError,
        InstallError,
        ImageError,
        ProfileError,
        ConversionError,
        InspectError,
        CredentialsError,
        StartupError,
    ) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as error:
        if error.name not in SANDBOX_EXTRA_MODULES:
            raise
        print(
            f"{prog}: the sandbox needs the `sandbox` extra, which this install lacks ({error.name}): "
            "pip install 'promsched[sandbox]', or with pipx: pipx install --force 'promsched[sandbox]'",
            file=sys.stderr,
        )
        return 1


def kubectl_main() -> int:
    """`kubectl promsched ...`: kubectl runs `kubectl-promsched` from PATH with the arguments after it."""
    return main(prog="kubectl promsched")


if __name__ == "__main__":
    sys.exit(main())
