"""`promsched sandbox up|status|down`: start and stop a local control plane of real components.

Every process runs in a session of its own, so it outlives the launcher, and leaves a pid file
(`DIR/pids/NAME.pid`: pid and kernel start time) the moment it is spawned. `down` trusts only pid files
whose start time still matches, so it never signals a recycled pid, and it works after a crash of the
launcher, of a test run or of the machine's shell.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from promsched.sandbox import certifying, exporting, installing
from promsched.sandbox.clusters import DEFAULT_DIR, Sandbox, SandboxError, SandboxState
from promsched.sandbox.components import KWOK_NODE_STAGES, SANDBOX_RELEASE
from promsched.sandbox.profiles import LoadProfile, NodeSetup, load_profiles_file, parse_profiles

Report = Callable[[str], None]
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
SCRAPE_SECONDS = 2
SERVICE_CIDR = "10.96.0.0/16"


def default_history(nodes: int) -> float:
    """Seconds of backfilled metric history: past the original plugins' 60-minute network window for
    small sandboxes; shorter for large ones, whose backfill would otherwise take minutes."""
    return 65 * 60.0 if nodes <= 100 else 10 * 60.0


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_time(pid: int) -> str | None:
    """The kernel's start time of a process (field 22 of /proc/PID/stat), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    # A zombie has exited; only its parent's wait is missing.
    return None if fields[0] == "Z" else fields[19]


@dataclass(frozen=True)
class Process:
    name: str
    pid: int
    started: str

    def alive(self) -> bool:
        return _start_time(self.pid) == self.started


class Supervisor:
    """Spawns and stops the sandbox's processes through pid files in `DIR/pids`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.pids = directory / "pids"
        self.logs = directory / "logs"

    def spawn(self, name: str, command: Sequence[str], env: dict[str, str] | None = None) -> Process:
        self.pids.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("ab") as log:
            popen = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=self.directory,
            )
        started = _start_time(popen.pid) or ""
        (self.pids / f"{name}.pid").write_text(f"{popen.pid} {started}\n")
        # Kept so the same process can be started again (fault tests restart components).
        (self.pids / f"{name}.cmd").write_text(json.dumps({"command": list(command), "env": env}))
        return Process(name, popen.pid, started)

    def restart(self, name: str) -> Process:
        """Stop `name` if it runs and start it again with the command it was started with."""
        recipe_file = self.pids / f"{name}.cmd"
        if not recipe_file.exists():
            raise SandboxError(f"{name} was never started in {self.directory}")
        recipe = json.loads(recipe_file.read_text())
        self.stop(name)
        return self.spawn(name, recipe["command"], recipe["env"])

    def recorded(self) -> list[Process]:
        processes = []
        for path in sorted(self.pids.glob("*.pid")) if self.pids.exists() else []:
            pid, _, started = path.read_text().strip().partition(" ")
            processes.append(Process(path.stem, int(pid), started))
        return processes

    def get(self, name: str) -> Process | None:
        return next((p for p in self.recorded() if p.name == name), None)

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, name: str, grace: float = 10.0) -> bool:
        """Stop one recorded process; True when it was running."""
        process = self.get(name)
        (self.pids / f"{name}.pid").unlink(missing_ok=True)
        if process is None or not process.alive():
            return False
        _terminate(process, grace, lambda _line: None)
        return True

    def stop_all(self, report: Report, grace: float = 10.0) -> list[str]:
        """Stop every recorded live process group, last started first (clients before the servers they
        need, so none hangs on a dead dependency); SIGKILL what ignores SIGTERM for `grace` seconds."""
        alive = [p for p in self.recorded() if p.alive()]
        alive.sort(key=lambda p: int(p.started or 0), reverse=True)
        for process in alive:
            _terminate(process, grace, report)
        for path in [*self.pids.glob("*.pid"), *self.pids.glob("*.cmd")] if self.pids.exists() else []:
            path.unlink()
        return [p.name for p in alive]


def _terminate(process: Process, grace: float, report: Report) -> None:
    _signal_group(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and process.alive():
        time.sleep(0.05)
    if process.alive():
        report(f"  {process.name} did not stop on SIGTERM within {grace:.0f}s; killing it")
        _signal_group(process.pid, signal.SIGKILL)
    _reap(process.pid)


def _signal_group(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signum)


def _reap(pid: int) -> None:
    """Collect our own children so they do not linger as zombies; other processes are not ours to wait on."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def wait_until(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    process: Process | None = None,
    supervisor: Supervisor | None = None,
    interval: float = 0.25,
) -> None:
    """Poll `check` until it holds; fail early with the log if `process` died, else at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except (OSError, urllib.error.URLError, SandboxError, ValueError):
            pass
        if process is not None and supervisor is not None and not process.alive():
            raise SandboxError(
                f"{process.name} exited while waiting for {what}:\n{supervisor.log_tail(process.name)}"
            )
        if time.monotonic() > deadline:
            tail = f":\n{supervisor.log_tail(process.name)}" if process and supervisor else ""
            raise SandboxError(f"timed out after {timeout:.0f}s waiting for {what}{tail}")
        time.sleep(interval)


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    with urllib.request.urlopen(url, timeout=5, context=context) as response:
        return bool(response.status == 200)


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
        "topology.kubernetes.io/zone": ZONES[index % len(ZONES)],
        "node.kubernetes.io/instance-type": "sandbox-4c16g",
        "type": "kwok",
        **setup.labels,
    }
    resources = {"cpu": "4", "memory": "16Gi", "ephemeral-storage": "100Gi", "pods": "110"}
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


def _prometheus_config(state: SandboxState) -> dict[str, object]:
    return {
        "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": f"{SCRAPE_SECONDS}s"},
        "scrape_configs": [
            # One target serves every simulated node; honor_labels keeps each series' own `instance`.
            {
                "job_name": exporting.JOB,
                "honor_labels": True,
                "static_configs": [{"targets": [f"127.0.0.1:{state.ports['exporter']}"]}],
            },
            {
                "job_name": "node-exporter",
                "static_configs": [{"targets": [f"127.0.0.1:{state.ports['node_exporter']}"]}],
            },
        ],
    }


def _prometheus_query(url: str, query: str) -> list[dict[str, object]]:
    data = urllib.parse.urlencode({"query": query}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=data, timeout=5) as response:
        result: list[dict[str, object]] = json.load(response)["data"]["result"]
    return result


def _ready_nodes(sandbox: Sandbox) -> int:
    nodes = json.loads(sandbox.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    count = 0
    for node in nodes:
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", [])
        )
        not_ready_taint = any(
            t["key"].startswith("node.kubernetes.io/") for t in node["spec"].get("taints", [])
        )
        count += ready and not not_ready_taint
    return count


def up(
    directory: Path = DEFAULT_DIR,
    nodes: int = 6,
    profiles_file: Path | None = None,
    history: float | None = None,
    report: Report = _print,
) -> Sandbox:
    """Start a sandbox in `directory`; returns once every component is ready.

    `history` is the seconds of metric history backfilled before Prometheus starts (default by size).
    """
    started_at = time.monotonic()
    directory = directory.resolve()
    supervisor = Supervisor(directory)
    live = [p.name for p in supervisor.recorded() if p.alive()]
    if live:
        raise SandboxError(
            f"a sandbox is already up in {directory} ({', '.join(live)} running); "
            f"use it (`promsched sandbox status --dir {directory}`) or stop it with `promsched sandbox down`"
        )
    if nodes < 1:
        raise SandboxError("--nodes must be at least 1")
    node_names = [f"node-{i}" for i in range(nodes)]
    setups = (
        load_profiles_file(profiles_file, node_names) if profiles_file else parse_profiles({}, node_names)
    )

    bin_dir = installing.install(report)
    # A previous sandbox's data would be a different cluster with stale nodes and leases.
    for leftover in ("etcd", "prometheus-data", "pki", "logs", "pids"):
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
            "prometheus",
        )
    }
    state = SandboxState(str(directory), str(bin_dir), SANDBOX_RELEASE, node_names, ports)
    sandbox = Sandbox(directory, state)
    report(f"starting a sandbox of {nodes} node(s) in {directory}")
    pki = certifying.issue(directory / "pki")
    try:
        _start_control_plane(sandbox, supervisor, pki, report)
        _start_nodes(sandbox, supervisor, setups, report)
        metrics_ready_at = _start_metrics(
            sandbox, supervisor, setups, default_history(nodes) if history is None else history, report
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
    wait_until("etcd /health", lambda: _http_ok(f"{etcd_url}/health"), 60, etcd, supervisor)

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
        lambda: _http_ok(f"{sandbox.state.apiserver_url}/readyz", context),
        120,
        apiserver,
        supervisor,
    )
    sandbox.kubeconfig.write_text(yaml.safe_dump(_kubeconfig(sandbox.state, pki)))
    sandbox.kubeconfig.chmod(0o600)

    report("  kube-controller-manager")
    kubeconfig = str(sandbox.kubeconfig)
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
            "--node-lease-duration-seconds=40",
            f"--config={sandbox.binary(KWOK_NODE_STAGES)}",
            f"--server-address=127.0.0.1:{sandbox.state.ports['kwok']}",
        ],
    )
    wait_until(
        f"{len(names)} Ready node(s) without not-ready taints",
        lambda: _ready_nodes(sandbox) == len(names),
        60 + len(names) / 20,
        kwok,
        supervisor,
        interval=0.5,
    )


def _backfill(directory: Path, profiles: dict[str, LoadProfile], since: float, until: float) -> None:
    backfill = directory / "history.om"
    exporting.write_history(profiles, since, until, SCRAPE_SECONDS, backfill)
    command = ["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(backfill)]
    result = subprocess.run(
        [*command, str(directory / "prometheus-data")], capture_output=True, text=True, check=False
    )
    backfill.unlink()
    if result.returncode != 0:
        raise SandboxError(f"promtool could not backfill the metric history: {result.stderr.strip()}")


def _start_metrics(
    sandbox: Sandbox, supervisor: Supervisor, setups: dict[str, NodeSetup], history: float, report: Report
) -> float:
    """Start the metrics pipeline; returns the time of the first scrape that every node's series share.

    That time is the sandbox's `ready_at`: a query evaluated at a scrape's own timestamp has a sample at
    the window's end, so rate() need not extrapolate there. At any other instant Prometheus extrapolates
    by half a scrape interval when the newest sample is more than 1.1 intervals old (a late scrape on a
    busy machine), and a 1m CPU rate then reads a few points high.
    """
    state = sandbox.state
    directory = sandbox.directory
    report(
        f"  {history / 60:.0f} minute(s) of metric history, node-metrics exporter, node_exporter, Prometheus"
    )
    (directory / "profiles.json").write_text(json.dumps({n: s.load.as_dict() for n, s in setups.items()}))
    history_end = time.time()
    since = history_end - history
    if history > 0:
        _backfill(directory, {n: s.load for n, s in setups.items()}, since, history_end)
    exporter = supervisor.spawn(
        "exporter",
        [
            sys.executable,
            "-m",
            "promsched.sandbox.exporting",
            f"--port={state.ports['exporter']}",
            f"--state={directory / 'profiles.json'}",
            f"--since={since}",
        ],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    node_exporter = supervisor.spawn(
        "node-exporter",
        [
            "prometheus-node-exporter",
            f"--web.listen-address=127.0.0.1:{state.ports['node_exporter']}",
        ],
    )
    (directory / "prometheus.yml").write_text(yaml.safe_dump(_prometheus_config(state), sort_keys=False))
    prometheus = supervisor.spawn(
        "prometheus",
        [
            "prometheus",
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{state.ports['prometheus']}",
            "--storage.tsdb.retention.time=2h",
            "--log.level=warn",
        ],
    )
    wait_until(
        "the node-metrics exporter",
        lambda: _http_ok(f"{state.exporter_url}/profiles"),
        30,
        exporter,
        supervisor,
    )
    wait_until(
        "prometheus-node-exporter",
        lambda: _http_ok(f"http://127.0.0.1:{state.ports['node_exporter']}/metrics"),
        30,
        node_exporter,
        supervisor,
    )
    wait_until(
        "Prometheus /-/ready", lambda: _http_ok(f"{state.prometheus_url}/-/ready"), 60, prometheus, supervisor
    )
    count = len(state.node_names)
    idle = f'node_cpu_seconds_total{{job="{exporting.JOB}",cpu="0",mode="idle"}}'

    def scraped_live() -> bool:
        # The backfilled history alone already yields rates, so wait for a scrape newer than it, and
        # for rates of every node (a sandbox without history needs two scrapes for those).
        live = _prometheus_query(state.prometheus_url, f"timestamp({idle}) > {history_end:.3f}")
        rates = _prometheus_query(state.prometheus_url, f"rate({idle}[1m])")
        return len(live) == count and len(rates) == count

    wait_until(
        f"live metrics in Prometheus for {count} node(s)", scraped_live, 90, prometheus, supervisor, 0.5
    )
    # One target serves every node, so their newest samples share one timestamp.
    (newest,) = _prometheus_query(state.prometheus_url, f"min(timestamp({idle}))")
    stamp = newest["value"]
    assert isinstance(stamp, list)
    return float(stamp[1])


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int | None
    running: bool


def status(directory: Path = DEFAULT_DIR) -> list[ComponentStatus]:
    supervisor = Supervisor(directory.resolve())
    recorded = {p.name: p for p in supervisor.recorded()}
    rows = []
    for name in COMPONENTS:
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
