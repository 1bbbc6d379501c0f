"""Trimaran, the load-aware peer promsched is measured against, run for real on a sandbox.

Trimaran is kube-scheduler with the scheduler-plugins out-of-tree plugins (built from the pinned module,
see `components.TRIMARAN_BUILD`). One process runs one profile with one plugin, TargetLoadPacking or
LoadVariationRiskBalancing, whose metrics come from load-watcher as a library reading the sandbox's
Prometheus (the recording rules in `recording_rules`). Its configuration follows the module's sample
(`manifests/trimaran/scheduler-config.yaml`) in today's `kubescheduler.config.k8s.io/v1` terms: the
sample (written for v1beta3) disables NodeResourcesBalancedAllocation and NodeResourcesLeastAllocated
scoring. LeastAllocated became NodeResourcesFit's scoring strategy in v1beta2 and the old name now names
no plugin, so disabling it would silently leave least-allocated spreading on against the packing; here
NodeResourcesFit's score is disabled instead. Both plugins run with those two scores off and the other
default scores on (LoadVariationRiskBalancing's own sample disables nothing; one profile shape for both
keeps the plugin the only difference).
"""

from __future__ import annotations

import re
import ssl
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import yaml

from promsched.sandbox.builds import installing
from promsched.sandbox.builds.components import TRIMARAN_BINARY
from promsched.sandbox.control_plane.clusters import Sandbox, SandboxError
from promsched.sandbox.control_plane.supervising import Report, Supervisor, free_port, wait_until
from promsched.sandbox.node_metrics import monitoring

TrimaranPlugin = Literal["TargetLoadPacking", "LoadVariationRiskBalancing"]
TRIMARAN_PLUGINS: tuple[TrimaranPlugin, ...] = get_args(TrimaranPlugin)
SCHEDULER_NAMES: dict[TrimaranPlugin, str] = {
    "TargetLoadPacking": "trimaran-tlp",
    "LoadVariationRiskBalancing": "trimaran-lvrb",
}
# What the sample configuration turns off so that the Trimaran plugin decides (see the module docstring).
DISABLED_SCORES = ("NodeResourcesBalancedAllocation", "NodeResourcesFit")
# The plugin files whose per-node scores are logged at verbosity 6 (klog's -vmodule matches file names):
# with them the log shows each node's measured load and score, and nothing else grows.
SCORE_LOGGING = "targetloadpacking=6,loadvariationriskbalancing=6,analysis=6,resourcestats=6"
# Log lines that mean the plugin did not get a node's metrics from load-watcher (scheduler-plugins'
# collector and plugins, and load-watcher's Prometheus provider, which logs through logrus).
METRICS_FAILURES = re.compile(
    r"error querying Prometheus|received error while fetching metrics|Load watcher client failed"
    r"|Unable to populate metrics|Unable to update metrics|Metrics not available from watcher"
    r"|Unable to find metrics for node|Failed to get metrics for node|Cpu metric not found"
)
# A node's CPU metric found and used: the V(6) line TargetLoadPacking logs before it scores a node (on
# every branch of its score), and the one LoadVariationRiskBalancing's resource statistics log for CPU.
SCORED_FROM_METRICS = re.compile(
    r'"Calculating CPU utilization and capacity".*?nodeName="([^"]+)"'
    r'|"Resource usage statistics for node".*?\bnode="([^"]+)".*?resource="cpu"'
)


@dataclass(frozen=True)
class TrimaranSettings:
    """The plugins' arguments; defaults are the sample configuration's, else the plugin's own.

    TargetLoadPacking: `target_utilization` (percent CPU a node is packed towards; sample and plugin
    default 40) and `requests_multiplier` (a container without a CPU limit is predicted at its request
    times this; the sample sets "1", the plugin's default is "1.5"). LoadVariationRiskBalancing:
    `safe_variance_margin` and `safe_variance_sensitivity` (the plugin's defaults, 1 and 1).
    """

    target_utilization: int = 40
    requests_multiplier: str = "1"
    safe_variance_margin: float = 1.0
    safe_variance_sensitivity: float = 1.0
    # kube-scheduler's client defaults.
    qps: float = 50.0
    burst: int = 100
    # Log each node's score (see SCORE_LOGGING); costs little at benchmark scale too.
    log_scores: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.target_utilization < 100:
            raise ValueError(
                f"target_utilization: {self.target_utilization} is not a percentage between 0 and 100"
            )
        try:
            multiplier = float(self.requests_multiplier)
        except ValueError:
            multiplier = -1.0
        if multiplier < 0:
            raise ValueError(
                f"requests_multiplier: {self.requests_multiplier!r} is not a non-negative number, e.g. '1.5'"
            )


def plugin_args(plugin: TrimaranPlugin, prometheus_url: str, settings: TrimaranSettings) -> dict[str, object]:
    metric_provider = {"type": "Prometheus", "address": prometheus_url}
    if plugin == "TargetLoadPacking":
        return {
            "targetUtilization": settings.target_utilization,
            "defaultRequestsMultiplier": settings.requests_multiplier,
            "metricProvider": metric_provider,
        }
    return {
        "safeVarianceMargin": settings.safe_variance_margin,
        "safeVarianceSensitivity": settings.safe_variance_sensitivity,
        "metricProvider": metric_provider,
    }


def scheduler_configuration(
    plugin: TrimaranPlugin,
    kubeconfig: Path,
    prometheus_url: str,
    scheduler_name: str | None = None,
    settings: TrimaranSettings | None = None,
) -> dict[str, object]:
    """The KubeSchedulerConfiguration of one Trimaran profile; leader election off (one replica)."""
    if plugin not in TRIMARAN_PLUGINS:
        raise ValueError(
            f"plugin: {plugin!r} is not a Trimaran plugin; use one of {', '.join(TRIMARAN_PLUGINS)}"
        )
    settings = settings or TrimaranSettings()
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": settings.qps, "burst": settings.burst},
        "leaderElection": {"leaderElect": False},
        "profiles": [
            {
                "schedulerName": scheduler_name or SCHEDULER_NAMES[plugin],
                "plugins": {
                    "score": {
                        "disabled": [{"name": name} for name in DISABLED_SCORES],
                        "enabled": [{"name": plugin}],
                    }
                },
                "pluginConfig": [{"name": plugin, "args": plugin_args(plugin, prometheus_url, settings)}],
            }
        ],
    }


@dataclass(frozen=True)
class Trimaran:
    """A running Trimaran scheduler on a sandbox, supervised like the sandbox's own processes (so
    `promsched sandbox down` stops it too)."""

    directory: Path
    plugin: TrimaranPlugin
    scheduler_name: str
    process: str  # the supervisor's name for it
    pid: int
    config: Path
    log: Path

    def alive(self) -> bool:
        running = Supervisor(self.directory).get(self.process)
        return running is not None and running.pid == self.pid and running.alive()

    def stop(self) -> bool:
        """Stop it; True when it was running."""
        return Supervisor(self.directory).stop(self.process)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def metrics_failures(self) -> list[str]:
        """Log lines saying a node's metrics could not be read (none when load-watcher works)."""
        return [line for line in self.log_text().splitlines() if METRICS_FAILURES.search(line)]

    def nodes_scored_from_metrics(self) -> set[str]:
        """Nodes the plugin scored from their metrics so far (needs `log_scores`)."""
        return {tlp or lvrb for tlp, lvrb in SCORED_FROM_METRICS.findall(self.log_text())}


def start_trimaran(
    sandbox: Sandbox,
    plugin: TrimaranPlugin,
    scheduler_name: str | None = None,
    settings: TrimaranSettings | None = None,
    report: Report = lambda _line: None,
    timeout: float = 180.0,
) -> Trimaran:
    """Start Trimaran with `plugin` against `sandbox` (its binary is built first if not cached) and
    return once it serves /readyz: load-watcher fetches its first metrics before the plugin is built,
    so by then the plugin has the nodes' metrics (or its log says why not)."""
    settings = settings or TrimaranSettings()
    name = scheduler_name or SCHEDULER_NAMES[plugin]
    binary = installing.install_trimaran(report) / TRIMARAN_BINARY
    config = sandbox.directory / f"{name}.yaml"
    config.write_text(
        yaml.safe_dump(
            scheduler_configuration(plugin, sandbox.kubeconfig, sandbox.prometheus_url, name, settings)
        )
    )
    kubeconfig = str(sandbox.kubeconfig)
    port = free_port()
    command = [
        str(binary),
        f"--config={config}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
    ]
    if settings.log_scores:
        command.append(f"--vmodule={SCORE_LOGGING}")
    supervisor = Supervisor(sandbox.directory)
    # load-watcher fetches once at start-up and then once a minute: a start before the rules' first
    # evaluation would leave every node without metrics (minimum score) for that minute.
    nodes = set(sandbox.node_names)
    wait_until(
        "the load-watcher recording rules for every node",
        lambda: nodes <= monitoring.nodes_with_recorded_load(sandbox.prometheus_url),
        60,
    )
    if supervisor.stop(name):
        report(f"  stopped a {name} left running")
    (supervisor.logs / f"{name}.log").unlink(missing_ok=True)
    report(f"  {name}: Trimaran with {plugin}, metrics from {sandbox.prometheus_url}")
    process = supervisor.spawn(name, command)
    # Its serving certificate is self-signed, as kube-scheduler's is without --tls-cert-file.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE

    def ready() -> bool:
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/readyz", timeout=5, context=context
        ) as response:
            return bool(response.status == 200)

    try:
        wait_until(f"{name} /readyz", ready, timeout, process, supervisor)
    except SandboxError:
        supervisor.stop(name)
        raise
    return Trimaran(
        sandbox.directory, plugin, name, name, process.pid, config, supervisor.logs / f"{name}.log"
    )
