"""`promsched demo`: the scheduler placing a sample workload on a running sandbox, and why.

It installs the CRD and the example policy (pointed at the sandbox's Prometheus), starts `promsched run`
as one of the sandbox's processes (so `promsched sandbox down` stops it too), applies the example
Deployment, waits until every replica is bound, and prints where each landed with the node's load.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from promsched.api.crds import render_crd_yaml
from promsched.api.policies import SchedulingPolicy
from promsched.metrics.identifying import NodeDirectory
from promsched.metrics.planning import endpoint_from_policy, plan_from_policy
from promsched.metrics.querying import PrometheusClient
from promsched.metrics.refreshing import take_snapshot
from promsched.metrics.scoring import NodeResult, score_nodes
from promsched.sandbox.clusters import Sandbox, SandboxError
from promsched.sandbox.launching import Supervisor, free_port, wait_until

Report = Callable[[str], None]
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
DEMO_REPLICAS = 8


def _print(line: str) -> None:
    print(line, flush=True)


def policy_for(sandbox: Sandbox, path: Path) -> dict[str, Any]:
    """An example policy with the sandbox's Prometheus as its URL."""
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    document["spec"]["prometheus"]["url"] = sandbox.prometheus_url
    return document


def start_scheduler(
    sandbox: Sandbox, report: Report, name: str = "promsched", extra: tuple[str, ...] = ()
) -> str:
    """Run `promsched run` as the sandbox process `name`; returns its base URL once /readyz answers."""
    supervisor = Supervisor(sandbox.directory)
    existing = supervisor.get(name)
    if existing is not None and existing.alive():
        raise SandboxError(f"{name} is already running in this sandbox; `promsched sandbox down` stops it")
    listen = f"127.0.0.1:{free_port()}"
    report(f"starting promsched run (probes and /metrics on {listen})")
    process = supervisor.spawn(
        name,
        [
            sys.executable,
            "-m",
            "promsched.cli",
            "run",
            "--kubeconfig",
            str(sandbox.kubeconfig),
            "--listen",
            listen,
            *extra,
        ],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    url = f"http://{listen}"

    def ready() -> bool:
        with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
            return bool(response.status == 200)

    wait_until(f"{name} /readyz", ready, 60, process, supervisor)
    return url


def _pods(sandbox: Sandbox, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        sandbox.kubectl("get", "pods", "-n", "default", "-l", selector, "-o", "json").stdout
    )["items"]
    return items


async def _score(sandbox: Sandbox, policy: SchedulingPolicy) -> dict[str, NodeResult]:
    plan = plan_from_policy(policy.spec)
    endpoint = await endpoint_from_policy(policy.spec.prometheus, None)
    async with PrometheusClient(endpoint) as client:
        snapshot = await take_snapshot(plan, client, NodeDirectory.of(sandbox.node_names))
    return {result.node: result for result in score_nodes(snapshot, sandbox.node_names)}


def placement_table(results: dict[str, NodeResult], pods_by_node: dict[str, list[str]]) -> str:
    """Each node's load (raw values), its score now, and the demo pods it got."""
    plugins = [p.name for p in next(iter(results.values())).plugins] if results else []
    header = ["NODE", *(name.upper() for name in plugins), "SCORE", "PODS"]
    rows = [header]
    for node, result in sorted(results.items(), key=lambda item: -item[1].total):
        raw = {p.name: p.raw for p in result.plugins}
        cells = [f"{raw[name]:.1f}%" if raw[name] is not None else "-" for name in plugins]
        rows.append([node, *cells, f"{result.total:.1f}", str(len(pods_by_node.get(node, [])))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows
    )


def demo(directory: Path, report: Report = _print) -> None:
    sandbox = Sandbox.load(directory)
    report("applying the SchedulingPolicy CRD and examples/sandbox-policy.yaml")
    sandbox.kubectl("apply", "--server-side", "-f", "-", input=render_crd_yaml())
    sandbox.kubectl(
        "wait", "--for=condition=Established", "crd/schedulingpolicies.promsched.io", "--timeout=60s"
    )
    document = policy_for(sandbox, EXAMPLES / "sandbox-policy.yaml")
    sandbox.kubectl("apply", "-f", "-", input=json.dumps(document))
    start_scheduler(sandbox, report)
    deployment = yaml.safe_load((EXAMPLES / "deployment.yaml").read_text())
    deployment["spec"]["replicas"] = DEMO_REPLICAS
    report(f"applying examples/deployment.yaml with {DEMO_REPLICAS} replicas (schedulerName: promsched)")
    sandbox.kubectl("apply", "-f", "-", input=json.dumps(deployment))
    selector = "app.kubernetes.io/name=promsched-demo"
    started = time.monotonic()
    wait_until(
        f"{DEMO_REPLICAS} demo pods bound",
        lambda: sum(bool(p["spec"].get("nodeName")) for p in _pods(sandbox, selector)) == DEMO_REPLICAS,
        120,
    )
    report(f"all {DEMO_REPLICAS} pods bound in {time.monotonic() - started:.1f}s\n")
    pods_by_node: dict[str, list[str]] = {}
    for pod in _pods(sandbox, selector):
        pods_by_node.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
    results = asyncio.run(_score(sandbox, SchedulingPolicy.from_object(document)))
    report(placement_table(results, pods_by_node))
    report(
        "\nLess loaded nodes score higher; each placed pod adds its requests to its node's load until the"
        "\nnext metric snapshot, so a burst spreads instead of piling onto the idlest node.\n"
        "\nTry it yourself:\n"
        f"  set -a; . {directory}/sandbox.env; set +a; export PATH=$PROMSCHED_SANDBOX_BIN:$PATH\n"
        "  kubectl get schedulingpolicies -o wide\n"
        "  kubectl describe pod -l app.kubernetes.io/name=promsched-demo | grep -A3 Events\n"
        f"  promsched sandbox load node-1 --cpu 95 --dir {directory}   # then scale the Deployment\n"
        "  make demo-down\n"
    )
