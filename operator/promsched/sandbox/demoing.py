"""`promsched demo`: the scheduler placing a sample workload on a running sandbox, and why.

It installs the CRD and the example policy (pointed at the sandbox's Prometheus), starts `promsched run`
as one of the sandbox's processes (so `promsched sandbox down` stops it too), applies the example
Deployment, waits until every replica is bound, and prints where each landed with the node's load and
score. Run again on the same sandbox, it keeps the scheduler it started the first time. Each step is a
function of its own, so tests run them against an operator they started.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from promsched.api.crds import render_crd_yaml
from promsched.api.policies import SchedulingPolicy
from promsched.operating import connecting, inspecting
from promsched.operating.inspections import Ranking
from promsched.operating.rendering import LEGEND, ranking_table
from promsched.sandbox.control_plane.clusters import Sandbox, SandboxError
from promsched.sandbox.control_plane.supervising import Process, Supervisor, free_port, wait_until

Report = Callable[[str], None]
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
DEMO_REPLICAS = 8
DEMO_NAMESPACE = "default"
DEMO_SELECTOR = "app.kubernetes.io/name=promsched-demo"


def _print(line: str) -> None:
    print(line, flush=True)


def _apply(sandbox: Sandbox, document: Mapping[str, Any]) -> None:
    sandbox.kubectl("apply", "-f", "-", input=json.dumps(document))


def install_crd(sandbox: Sandbox) -> None:
    sandbox.kubectl("apply", "--server-side", "-f", "-", input=render_crd_yaml())
    sandbox.wait_established("schedulingpolicies.promsched.io")


def demo_policy(
    sandbox: Sandbox, name: str | None = None, scheduler_name: str | None = None
) -> dict[str, Any]:
    """examples/sandbox-policy.yaml with the sandbox's Prometheus as its URL, optionally renamed."""
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / "sandbox-policy.yaml").read_text())
    document["spec"]["prometheus"]["url"] = sandbox.prometheus_url
    if name is not None:
        document["metadata"]["name"] = name
    if scheduler_name is not None:
        document["spec"]["schedulerName"] = scheduler_name
    return document


def demo_deployment(
    namespace: str = DEMO_NAMESPACE, scheduler_name: str | None = None, replicas: int = DEMO_REPLICAS
) -> dict[str, Any]:
    """examples/deployment.yaml with `replicas`, in `namespace`, optionally for another scheduler."""
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / "deployment.yaml").read_text())
    document["metadata"]["namespace"] = namespace
    document["spec"]["replicas"] = replicas
    if scheduler_name is not None:
        document["spec"]["template"]["spec"]["schedulerName"] = scheduler_name
    return document


def running_process(sandbox: Sandbox, name: str) -> Process | None:
    """The sandbox process `name`, when it is running."""
    process = Supervisor(sandbox.directory).get(name)
    return process if process is not None and process.alive() else None


def start_scheduler(
    sandbox: Sandbox,
    report: Report,
    name: str = "promsched",
    extra: tuple[str, ...] = (),
    source: Path | None = None,
) -> str:
    """Run `promsched run` as the sandbox process `name`; returns its base URL once /readyz answers.
    `source`: a folder holding the `promsched` package to run instead of this one (the benchmarks'
    baseline)."""
    if running_process(sandbox, name) is not None:
        raise SandboxError(f"{name} is already running in this sandbox; `promsched sandbox down` stops it")
    supervisor = Supervisor(sandbox.directory)
    listen = f"127.0.0.1:{free_port()}"
    report(f"starting promsched run (probes and /metrics on {listen})")
    # Its temporary files in the sandbox: a scheduler the tests kill (SIGKILL) cannot remove them at exit.
    temporary = sandbox.directory / "tmp" / name
    temporary.mkdir(parents=True, exist_ok=True)
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
        env=dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([*([str(source)] if source else []), *sys.path]),
            TMPDIR=str(temporary),
        ),
    )
    url = f"http://{listen}"

    def ready() -> bool:
        with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
            return bool(response.status == 200)

    wait_until(f"{name} /readyz", ready, 60, process, supervisor)
    return url


def wait_for_metrics(sandbox: Sandbox, policy_name: str, timeout: float = 60) -> None:
    """Wait until the policy has read every node's metrics once: the scheduler would score the pods
    that come before that without metrics, every node alike."""
    sandbox.kubectl(
        "wait",
        "--for=condition=MetricsComplete",
        f"schedulingpolicy/{policy_name}",
        f"--timeout={timeout:.0f}s",
    )


def _pods(sandbox: Sandbox, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        sandbox.kubectl("get", "pods", "-n", namespace, "-l", DEMO_SELECTOR, "-o", "json").stdout
    )["items"]
    return items


def wait_for_placements(
    sandbox: Sandbox, namespace: str = DEMO_NAMESPACE, replicas: int = DEMO_REPLICAS, timeout: float = 120
) -> dict[str, list[str]]:
    """Wait until `replicas` demo pods are bound; their names by node."""
    wait_until(
        f"{replicas} demo pods bound",
        lambda: sum(bool(p["spec"].get("nodeName")) for p in _pods(sandbox, namespace)) == replicas,
        timeout,
    )
    pods_by_node: dict[str, list[str]] = {}
    for pod in _pods(sandbox, namespace):
        pods_by_node.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
    return pods_by_node


async def _rank(sandbox: Sandbox, policy: SchedulingPolicy) -> Ranking:
    async with connecting.connected(sandbox.kubeconfig) as client:
        pod = inspecting.example_pod(policy)
        return await inspecting.rank(client, policy, pod, "a pod with no requests")


def placement_table(sandbox: Sandbox, policy: SchedulingPolicy, pods_by_node: Mapping[str, list[str]]) -> str:
    """Each node's load and score now, ranked as `promsched score` ranks them, and the demo pods it got."""
    ranking = asyncio.run(_rank(sandbox, policy))
    weights = {plugin.name: plugin.weight for plugin in policy.spec.plugins}
    scores = [result.to_api() for result in ranking.outcome.ranked]
    counts = {node: len(pods) for node, pods in pods_by_node.items()}
    return f"{ranking_table(scores, weights, pods=counts)}\n\n{LEGEND}"


def demo(directory: Path, report: Report = _print) -> None:
    sandbox = Sandbox.load(directory)
    report("applying the SchedulingPolicy CRD and examples/sandbox-policy.yaml")
    install_crd(sandbox)
    policy = demo_policy(sandbox)
    _apply(sandbox, policy)
    scheduler = running_process(sandbox, "promsched")
    if scheduler is None:
        start_scheduler(sandbox, report)
    else:
        report(f"promsched run is already running in this sandbox (pid {scheduler.pid}); the demo uses it")
    report("waiting for the policy's first metric snapshot")
    wait_for_metrics(sandbox, policy["metadata"]["name"])
    report(f"applying examples/deployment.yaml with {DEMO_REPLICAS} replicas (schedulerName: promsched)")
    _apply(sandbox, demo_deployment())
    started = time.monotonic()
    pods_by_node = wait_for_placements(sandbox)
    report(f"all {DEMO_REPLICAS} pods bound in {time.monotonic() - started:.1f}s\n")
    report(placement_table(sandbox, SchedulingPolicy.from_object(policy), pods_by_node))
    example = min(pod for pods in pods_by_node.values() for pod in pods)
    # The console script sits next to the interpreter running it (the project's venv).
    promsched_bin = Path(sys.executable).parent
    report(
        "\nLess loaded nodes score higher; each placed pod adds its requests to its node's load until the"
        "\nmetrics can show it, so a burst spreads instead of piling onto the idlest node.\n"
        "\nTry it yourself:\n"
        f"  set -a; . {directory}/sandbox.env; set +a\n"
        f"  export PATH=$PROMSCHED_SANDBOX_BIN:{promsched_bin}:$PATH\n"
        "  kubectl get schedulingpolicies -o wide\n"
        "  kubectl describe pod -l app.kubernetes.io/name=promsched-demo | grep -A3 Events\n"
        f"  promsched explain {DEMO_NAMESPACE}/{example}   # why this pod went where it did\n"
        "  promsched score --policy examples/sandbox-policy.yaml --prometheus-url $PROMETHEUS_URL"
        "   # the ranking now, binding nothing\n"
        f"  promsched sandbox load node-1 --cpu 95 --dir {directory}   # then scale the Deployment:\n"
        "  kubectl scale deployment promsched-demo --replicas 12\n"
        "  make demo-down\n"
    )
