"""The schedulers the benches compare, the policy `make bench`'s promsched runs, and how each scheduler is
started as a sandbox process (and left to settle before it is measured)."""

from __future__ import annotations

import json
import math
import os
import ssl
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.commanding import REPO, Report
from bench.kubeapi import cpu_seconds
from bench.scraping import answered_plugins
from promsched.api.builtins import NODE_MIXIN_RULES
from promsched.sandbox.control_plane.clusters import Sandbox, SandboxError
from promsched.sandbox.control_plane.supervising import Supervisor, free_port, wait_until
from promsched.sandbox.demoing import install_crd, start_scheduler

POLICY_NAME = "bench"


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    kind: str  # promsched | kube-scheduler | null (bench.quality adds trimaran)
    qps: int = 0
    burst: int = 0
    # promsched only: the built-ins' spec.plugins[].source (None: node_exporter's raw series).
    metric_source: str | None = None
    # promsched only: the environment variable naming the folder that holds the `promsched` package to
    # run (another commit's `operator/`), for a before/after comparison in one run; None: this checkout's.
    source_env: str | None = None

    @property
    def scheduler_name(self) -> str:
        return f"bench-{self.key}"

    @property
    def process(self) -> str:
        return f"bench-{self.key}"


VARIANTS = (
    # promsched's client budget as kube-scheduler's raised one: the benchmark measures the schedulers'
    # own speed (quiet.py, about writes, runs it at the default 50/100).
    Variant("promsched", "promsched (QPS 1000/2000)", "promsched", 1000, 2000),
    # Opt-in (not in `make bench`): the same policy reading the node mixin's recording rules.
    Variant("promsched-rules", "promsched, rules (QPS 1000/2000)", "promsched", 1000, 2000, "RecordingRules"),
    # Opt-in: the operator of another checkout (`git worktree add /tmp/before <commit>`, then
    # PROMSCHED_BENCH_BASELINE=/tmp/before/operator), to measure a change against its parent in one run.
    Variant(
        "promsched-baseline",
        "promsched, baseline source (QPS 1000/2000)",
        "promsched",
        1000,
        2000,
        source_env="PROMSCHED_BENCH_BASELINE",
    ),
    Variant("ks-default", "kube-scheduler (QPS 50/100)", "kube-scheduler", 50, 100),
    Variant("ks-raised", "kube-scheduler (QPS 1000/2000)", "kube-scheduler", 1000, 2000),
    Variant("null", "null binder", "null"),
)
LABELS = {variant.key: variant.label for variant in VARIANTS}
PROMSCHED_KEYS = tuple(variant.key for variant in VARIANTS if variant.kind == "promsched")
MAKE_BENCH_VARIANTS = ("promsched", "ks-default", "ks-raised", "null")


# The sandbox's Prometheus shares 2 cores with everything else: at 5000 nodes the cpu plugin's query alone
# took ~3 s while kube-scheduler ran, and five at once ran past a 5 s timeout, so promsched went without
# metrics for minutes. A cluster that size has a Prometheus sized for it; the sandbox gets the time.
QUERY_SECONDS_PER_1000_NODES = 5


def query_timeout(nodes: int) -> str:
    """The benchmark policy's Prometheus timeout for a sandbox of `nodes` nodes: 5 s up to 1000."""
    return f"{QUERY_SECONDS_PER_1000_NODES * max(1, math.ceil(nodes / 1000))}s"


BENCH_PLUGINS = (
    {"name": "cpu", "weight": 4, "timeRange": "1m"},
    {"name": "memory", "weight": 3, "timeRange": "0s"},
    {"name": "diskIO", "weight": 2, "timeRange": "1m"},
    {"name": "diskSpace", "weight": 1, "timeRange": "0s"},
    {"name": "network", "weight": 1, "timeRange": "1m"},
)


def policy_spec(
    prometheus_url: str, refresh: str, timeout: str = query_timeout(0), variant: Variant = VARIANTS[0]
) -> dict[str, Any]:
    """The benchmark's policy: the five built-in plugins, CPU and memory weighing most. With the variant's
    metric source, every built-in that has a node mixin rule reads it, and nodes are named by `instance`
    as the sandbox's recorded series carry them (recording_rules)."""
    spec: dict[str, Any] = {
        "schedulerName": variant.scheduler_name,
        "prometheus": {"url": prometheus_url, "timeout": timeout},
        "refreshInterval": refresh,
        "staleAfter": "2m",
        "plugins": [dict(plugin) for plugin in BENCH_PLUGINS],
    }
    if variant.metric_source is not None:
        spec["nodeIdentity"] = {"source": "Label", "label": "instance"}
        for plugin in spec["plugins"]:
            if plugin["name"] in NODE_MIXIN_RULES:
                plugin["source"] = variant.metric_source
    return spec


def apply_policy(sandbox: Sandbox, refresh: str, nodes: int = 0, variant: Variant = VARIANTS[0]) -> None:
    """The benchmark's one policy, for `variant` (a promsched process serves every policy it finds)."""
    install_crd(sandbox)
    policy = {
        "apiVersion": "promsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": policy_spec(sandbox.prometheus_url, refresh, query_timeout(nodes), variant),
    }
    sandbox.kubectl("apply", "-f", "-", input=json.dumps(policy))


# How long a freshly started scheduler must stay quiet to count as settled: longer than promsched's
# pause before it lists a kind again after Kopf's own initial list of it (intake's RELIST_QUIET, 1 s),
# so that list (1000 nodes: about 0.3 s of CPU; 5000: about 1.4 s) is not measured as the run's.
QUIET_SECONDS = 2.5


# Five plugins' first answers; at 5000 nodes a refresh takes up to their timeout (25 s) on 2 cores.
METRICS_WAIT_SECONDS = 180.0


def applied_plugins(sandbox: Sandbox, scheduler_name: str) -> set[str]:
    """The plugins of the SchedulingPolicies applied for `scheduler_name`, whichever benchmark applied
    them (`make bench`'s five, `make bench-quality`'s two, ...)."""
    listing = json.loads(sandbox.kubectl("get", "schedulingpolicies", "-o", "json").stdout)
    return {
        plugin["name"]
        for policy in listing["items"]
        if policy["spec"].get("schedulerName") == scheduler_name
        for plugin in policy["spec"]["plugins"]
    }


def _wait_for_metrics(url: str, wanted: set[str]) -> None:
    """Wait until every plugin in `wanted` (those of the policies the process serves) has had an answer
    from Prometheus in this promsched process: pods created earlier would wait for the first snapshot
    (as the policy's MetricsComplete condition tells a user), measuring Prometheus's start rather than the
    scheduler. Not `demoing.wait_for_metrics`: the policy's condition still holds the previous run's
    process's True. kube-scheduler starts its runs with its informers synced."""
    wait_until(
        "promsched's first answer for every plugin",
        lambda: wanted <= answered_plugins(url),
        METRICS_WAIT_SECONDS,
    )


def _wait_quiet(pid: int, limit: float = 60.0, busy: float = 0.3) -> None:
    """Wait until a freshly started scheduler has digested its initial listings: CPU use below `busy`
    (share of one core) in every half-second window for QUIET_SECONDS, or `limit` seconds."""
    deadline = time.monotonic() + limit
    quiet = 0
    while time.monotonic() < deadline and quiet < QUIET_SECONDS / 0.5:
        before = cpu_seconds(pid)
        time.sleep(0.5)
        quiet = quiet + 1 if cpu_seconds(pid) - before < busy * 0.5 else 0


def _scheduler_env() -> dict[str, str]:
    paths = [str(REPO), *(p or os.getcwd() for p in sys.path)]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)))


def _start_kube_scheduler(sandbox: Sandbox, variant: Variant, supervisor: Supervisor) -> None:
    kubeconfig = str(sandbox.kubeconfig)
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig, "qps": variant.qps, "burst": variant.burst},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": variant.scheduler_name}],
    }
    config_file = sandbox.directory / f"{variant.process}.yaml"
    config_file.write_text(yaml.safe_dump(config))
    port = free_port()
    process = supervisor.spawn(
        variant.process,
        [
            sandbox.binary("kube-scheduler"),
            f"--config={config_file}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
        ],
    )
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE

    def ready() -> bool:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", timeout=5, context=context) as r:
            return bool(r.status == 200)

    wait_until(f"{variant.process} /readyz", ready, 120, process, supervisor)


def _start_null_binder(sandbox: Sandbox, variant: Variant, supervisor: Supervisor) -> None:
    ready_file: Path = sandbox.directory / f"{variant.process}.ready"
    ready_file.unlink(missing_ok=True)
    process = supervisor.spawn(
        variant.process,
        [
            sys.executable,
            "-m",
            "bench.nullbinder",
            f"--kubeconfig={sandbox.kubeconfig}",
            f"--scheduler-name={variant.scheduler_name}",
            "--concurrency=32",
            f"--ready={ready_file}",
        ],
        env=_scheduler_env(),
    )
    wait_until(f"{variant.process} ready", ready_file.exists, 60, process, supervisor)


def start_variant(sandbox: Sandbox, variant: Variant, report: Report) -> tuple[int, str | None]:
    """Start the variant's scheduler as a sandbox process; returns its pid once it is ready and settled,
    and for promsched the base URL of its /metrics."""
    supervisor = Supervisor(sandbox.directory)
    url = None
    if variant.kind == "promsched":
        wanted = applied_plugins(sandbox, variant.scheduler_name)
        if not wanted:
            raise SandboxError(f"no SchedulingPolicy with schedulerName {variant.scheduler_name} applied")
        budget = ("--kube-api-qps", str(variant.qps), "--kube-api-burst", str(variant.burst))
        source = Path(os.environ[variant.source_env]) if variant.source_env else None
        extra = budget if variant.qps else ()
        url = start_scheduler(sandbox, lambda _line: None, name=variant.process, extra=extra, source=source)
        _wait_for_metrics(url, wanted)
    elif variant.kind == "kube-scheduler":
        _start_kube_scheduler(sandbox, variant, supervisor)
    else:
        _start_null_binder(sandbox, variant, supervisor)
    process_record = supervisor.get(variant.process)
    if process_record is None:
        raise SandboxError(f"{variant.process} has no pid file")
    _wait_quiet(process_record.pid)
    return process_record.pid, url
