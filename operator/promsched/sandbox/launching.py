"""`promsched sandbox up|status|down`: start and stop a local control plane of real components.

The control plane (etcd, kube-apiserver, kube-controller-manager) and kwok's nodes start here, the
metrics pipeline in `monitoring`; every process through a `supervising.Supervisor`, so `down` stops
them from any process, after a crash of the launcher too.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import ssl
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from promsched.sandbox.builds import installing
from promsched.sandbox.builds.components import KWOK_NODE_STAGES, SANDBOX_RELEASE, SANDBOX_UP_BINARIES
from promsched.sandbox.builds.reporting import CountProgress
from promsched.sandbox.control_plane import certifying, sizing
from promsched.sandbox.control_plane.clusters import DEFAULT_DIR, Sandbox, SandboxError, SandboxState
from promsched.sandbox.control_plane.supervising import Report, Supervisor, free_port, http_ok, wait_until
from promsched.sandbox.node_metrics import counters, monitoring, victoria_metrics
from promsched.sandbox.node_metrics.profiles import NodeSetup, load_profiles_file, parse_profiles

# A default sandbox's; one with other metrics backends runs theirs instead of Prometheus (_components).
COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kwok",
    "exporter",
    "node-exporter",
    "prometheus",
)
ZONES = ("zone-a", "zone-b", "zone-c")
ZONE_LABEL = "topology.kubernetes.io/zone"
SERVICE_CIDR = "10.96.0.0/16"


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _kubeconfig(state: SandboxState, pki: certifying.Pki) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "sandbox",
                "cluster": {"server": state.apiserver_url, "certificate-authority": str(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
            }
        ],
        "contexts": [{"name": "sandbox", "context": {"cluster": "sandbox", "user": "admin"}}],
        "current-context": "sandbox",
    }


def node_manifest(name: str, index: int, setup: NodeSetup) -> dict[str, object]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        ZONE_LABEL: ZONES[index % len(ZONES)],
        "node.kubernetes.io/instance-type": "sandbox-4c16g",
        "type": "kwok",
        **setup.labels,
    }
    # The exporter's node series show this capacity: a pod's usage loads its node in proportion to it.
    memory = f"{counters.MEMORY_TOTAL_BYTES // 1024**3}Gi"
    resources = {"cpu": str(counters.CPUS), "memory": memory, "ephemeral-storage": "100Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        # kwok manages only nodes with this annotation, and keeps the status we give them.
        "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": setup.taints} if setup.taints else {},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": f"10.1.{index // 250}.{index % 250 + 1}"},
                {"type": "Hostname", "address": name},
            ],
            "capacity": resources,
            "allocatable": resources | {"cpu": "3900m", "memory": "15Gi"},
        },
    }


# One line per node, "<Ready status>\t<taint keys>": the two things readiness looks at, far lighter
# to produce and read than the nodes' full JSON at thousands of nodes.
READINESS_COLUMNS = (
    '{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\t"}{.spec.taints[*].key}{"\\n"}{end}'
)


def ready_count(listing: str) -> int:
    """Nodes of a `READINESS_COLUMNS` listing that are Ready and carry no node.kubernetes.io/ taint
    (not-ready, unreachable, ... as the node lifecycle controller sets them)."""
    count = 0
    for line in listing.splitlines():
        ready, _, taints = line.partition("\t")
        count += ready == "True" and not any(key.startswith("node.kubernetes.io/") for key in taints.split())
    return count


def _ready_nodes(sandbox: Sandbox) -> int:
    return ready_count(sandbox.kubectl("get", "nodes", "-o", f"jsonpath={READINESS_COLUMNS}").stdout)


def up(
    directory: Path = DEFAULT_DIR,
    nodes: int = 6,
    profiles_file: Path | None = None,
    history: float | None = None,
    report: Report = _print,
    reuse: bool = False,
    metrics: Sequence[str] = (monitoring.PROMETHEUS,),
    scrape_seconds: float = monitoring.SCRAPE_SECONDS,
) -> Sandbox:
    """Start a sandbox in `directory`; returns once every component is ready.

    `history` is the seconds of metric history backfilled before Prometheus starts (default by size).
    With `reuse`, a sandbox already up there with every component running is returned as it is (its
    nodes and loads unchanged). `metrics` names the metrics backends (monitoring.BACKEND_NAMES) that
    scrape the exporters: the first serves PROMETHEUS_URL, the others run beside it (see
    `monitoring.metrics_url`), every `scrape_seconds`, which also spaces the history's samples.
    """
    started_at = time.monotonic()
    directory = directory.resolve()
    supervisor = Supervisor(directory)
    live = [p.name for p in supervisor.recorded() if p.alive()]
    if live and reuse:
        sandbox = _reusable(directory, live)
        report(f"reusing the sandbox already up in {directory} ({len(sandbox.node_names)} node(s))")
        return sandbox
    if live:
        raise SandboxError(
            f"a sandbox is already up in {directory} ({', '.join(live)} running); "
            f"use it (`promsched sandbox status --dir {directory}`) or stop it with `promsched sandbox down`"
        )
    if nodes < 1:
        raise SandboxError("--nodes must be at least 1")
    unknown = [name for name in metrics if name not in monitoring.BACKEND_NAMES]
    if unknown or not metrics or len(set(metrics)) < len(metrics):
        choices = ", ".join(monitoring.BACKEND_NAMES)
        raise SandboxError(f"--metrics takes each of {choices} at most once, not {', '.join(metrics)}")
    node_names = [f"node-{i}" for i in range(nodes)]
    setups = (
        load_profiles_file(profiles_file, node_names) if profiles_file else parse_profiles({}, node_names)
    )

    bin_dir = installing.install(report, only=SANDBOX_UP_BINARIES)
    victoria_bin = (
        installing.install_victoriametrics(report) if monitoring.VICTORIAMETRICS in metrics else None
    )
    # A previous sandbox's data would be a different cluster with stale nodes and leases.
    for leftover in ("etcd", "prometheus-data", victoria_metrics.DATA_DIR, "pki", "logs", "pids"):
        shutil.rmtree(directory / leftover, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    ports = {
        name: free_port()
        for name in (
            "etcd",
            "etcd_peer",
            "apiserver",
            "controller_manager",
            "kwok",
            "exporter",
            "node_exporter",
            *monitoring.port_names(metrics),
        )
    }
    state = SandboxState(str(directory), str(bin_dir), SANDBOX_RELEASE, node_names, ports)
    sandbox = Sandbox(directory, state)
    report(f"starting a sandbox of {nodes} node(s) in {directory}")
    pki = certifying.issue(directory / "pki")
    try:
        _start_control_plane(sandbox, supervisor, pki, report)
        _start_nodes(sandbox, supervisor, setups, report)
        history_seconds = monitoring.default_history(nodes) if history is None else history
        metrics_ready_at = monitoring.start_metrics(
            sandbox, supervisor, setups, history_seconds, report, metrics, victoria_bin, scrape_seconds
        )
    except BaseException:
        report("start-up failed; stopping what was started")
        supervisor.stop_all(report)
        raise
    sandbox = Sandbox(directory, dataclasses.replace(state, ready_at=metrics_ready_at))
    sandbox.save()
    (directory / "sandbox.env").write_text(
        f"KUBECONFIG={sandbox.kubeconfig}\nPROMETHEUS_URL={state.prometheus_url}\n"
        f"PROMSCHED_EXPORTER_URL={state.exporter_url}\nPROMSCHED_SANDBOX_BIN={bin_dir}\n"
    )
    report(f"sandbox ready in {time.monotonic() - started_at:.1f}s")
    return sandbox


def _reusable(directory: Path, live: list[str]) -> Sandbox:
    """The sandbox up in `directory`, when every component runs and its start-up has finished."""
    missing = [name for name in _components(live) if name not in live]
    if not missing and (directory / "sandbox.json").exists():
        return Sandbox.load(directory)
    why = f"{', '.join(missing)} not running" if missing else "it is still starting"
    raise SandboxError(
        f"the sandbox in {directory} cannot be reused ({why}); "
        f"stop it with `promsched sandbox down --dir {directory}`"
    )


def _start_control_plane(
    sandbox: Sandbox, supervisor: Supervisor, pki: certifying.Pki, report: Report
) -> None:
    ports = sandbox.state.ports
    directory = sandbox.directory
    report("  etcd")
    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    peer_url = f"http://127.0.0.1:{ports['etcd_peer']}"
    etcd = supervisor.spawn(
        "etcd",
        [
            sandbox.binary("etcd"),
            "--name=sandbox",
            f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=sandbox={peer_url}",
            "--unsafe-no-fsync",
            "--quota-backend-bytes=4294967296",
            "--log-level=warn",
        ],
    )
    wait_until("etcd /health", lambda: http_ok(f"{etcd_url}/health"), 60, etcd, supervisor)

    report("  kube-apiserver")
    apiserver = supervisor.spawn(
        "kube-apiserver",
        [
            sandbox.binary("kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['apiserver']}",
            "--advertise-address=127.0.0.1",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            "--profiling=false",
            "--event-ttl=1h",
            # The `kubernetes` Service's endpoints may not be a loopback address; nothing here needs them.
            "--endpoint-reconciler-type=none",
        ],
    )
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    wait_until(
        "kube-apiserver /readyz",
        lambda: http_ok(f"{sandbox.state.apiserver_url}/readyz", context),
        120,
        apiserver,
        supervisor,
    )
    sandbox.kubeconfig.write_text(yaml.safe_dump(_kubeconfig(sandbox.state, pki)))
    sandbox.kubeconfig.chmod(0o600)

    report("  kube-controller-manager")
    kubeconfig = str(sandbox.kubeconfig)
    nodes = len(sandbox.state.node_names)
    manager = supervisor.spawn(
        "kube-controller-manager",
        [
            sandbox.binary("kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['controller_manager']}",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}",
            f"--cluster-signing-key-file={pki.ca_key}",
            "--use-service-account-credentials=true",
            "--controllers=*",
            "--leader-elect=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            # Nodes are looked at as healthy for as long as kwok may take to renew their leases.
            f"--node-monitor-grace-period={sizing.node_monitor_grace_seconds(nodes)}s",
            f"--node-startup-grace-period={sizing.node_startup_grace_seconds(nodes)}s",
        ],
    )
    wait_until(
        "the default ServiceAccount",
        lambda: (
            sandbox.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0
        ),
        120,
        manager,
        supervisor,
    )


def _start_nodes(
    sandbox: Sandbox, supervisor: Supervisor, setups: dict[str, NodeSetup], report: Report
) -> None:
    names = sandbox.state.node_names
    report(f"  kwok with {len(names)} node(s)")
    manifests = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [node_manifest(name, index, setups[name]) for index, name in enumerate(names)],
    }
    sandbox.kubectl("create", "-f", "-", input=json.dumps(manifests))
    kwok = supervisor.spawn(
        "kwok",
        [
            sandbox.binary("kwok"),
            f"--kubeconfig={sandbox.kubeconfig}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.244.0.1/16",
            "--node-ip=10.1.0.1",
            f"--node-lease-duration-seconds={sizing.lease_seconds(len(names))}",
            f"--config={sandbox.binary(KWOK_NODE_STAGES)}",
            f"--server-address=127.0.0.1:{sandbox.state.ports['kwok']}",
        ],
    )
    started_at = time.monotonic()
    with CountProgress("node(s) Ready", len(names), report) as ready:
        wait_until(
            f"{len(names)} Ready node(s) without not-ready taints",
            lambda: ready.update(_ready_nodes(sandbox)) == len(names),
            sizing.ready_deadline_seconds(len(names)),
            kwok,
            supervisor,
            interval=sizing.ready_poll_seconds(len(names)),
        )
    report(f"  {len(names)} node(s) Ready in {time.monotonic() - started_at:.0f}s")


def _components(recorded: list[str]) -> tuple[str, ...]:
    """Every sandbox's components, then those of the metrics backends it started (Prometheus when it
    started none yet)."""
    backends = monitoring.backends_of(recorded) or [monitoring.PROMETHEUS]
    every = tuple(name for names in monitoring.BACKEND_PROCESSES.values() for name in names)
    common = tuple(name for name in COMPONENTS if name not in every)
    return common + tuple(name for b in backends for name in monitoring.BACKEND_PROCESSES[b])


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int | None
    running: bool


def status(directory: Path = DEFAULT_DIR) -> list[ComponentStatus]:
    supervisor = Supervisor(directory.resolve())
    recorded = {p.name: p for p in supervisor.recorded()}
    rows = []
    for name in _components(list(recorded)):
        process = recorded.get(name)
        rows.append(
            ComponentStatus(name, process.pid if process else None, bool(process and process.alive()))
        )
    return rows


def down(directory: Path = DEFAULT_DIR, report: Report = _print) -> list[str]:
    """Stop every process the sandbox in `directory` started; returns the names of those that were running."""
    directory = directory.resolve()
    stopped = Supervisor(directory).stop_all(report)
    for leftover in ("sandbox.json", "sandbox.env"):
        (directory / leftover).unlink(missing_ok=True)
    report(
        f"stopped {', '.join(stopped)}" if stopped else f"no sandbox processes were running in {directory}"
    )
    return stopped
