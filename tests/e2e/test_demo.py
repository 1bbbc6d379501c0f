"""`make demo`'s steps, headless, on the test sandbox with the e2e operator; then `promsched explain` and
`promsched score` as a user runs them, checked against what the cluster actually did.

Node loads come from tests/fixtures/profiles.yaml: node-1 is the least loaded, node-0 the busiest.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from promsched.api.policies import SchedulingPolicy
from promsched.operating.rendering import format_value
from promsched.sandbox import demoing
from promsched.sandbox.control_plane.clusters import Sandbox
from support.clusters import Cluster
from support.loads import wait_for_profile_loads
from support.polling import eventually

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).parents[2] / "examples"


def promsched(sandbox: Sandbox, *args: str) -> str:
    """Run the promsched command against the sandbox; its output, after checking it succeeded."""
    result = subprocess.run(
        [sys.executable, "-m", "promsched.cli", *args, "--kubeconfig", str(sandbox.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def table_rows(text: str) -> list[list[str]]:
    """The cells of the first table in `text` (header first), split on the two-space column gaps."""
    lines = text.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("NODE "))
    rows = []
    for line in lines[start:]:
        if not line.strip():
            break
        rows.append([cell.strip() for cell in line.split("  ") if cell.strip()])
    return rows


def recorded_decision(cluster: Cluster, policy: str, pod: str) -> dict[str, Any] | None:
    decisions = cluster.status(policy).get("recentDecisions") or []
    return next((d for d in decisions if d["pod"] == f"{cluster.namespace}/{pod}"), None)


def test_the_demo_places_its_pods_and_explain_shows_each_ones_decision(
    sandbox: Sandbox, cluster: Cluster
) -> None:
    policy_name = cluster.scheduler_name
    document = demoing.demo_policy(sandbox, name=policy_name, scheduler_name=cluster.scheduler_name)
    cluster.apply(document)
    cluster.policies.append(policy_name)
    demoing.wait_for_metrics(sandbox, policy_name)
    cluster.apply(demoing.demo_deployment(cluster.namespace, cluster.scheduler_name))
    pods_by_node = demoing.wait_for_placements(sandbox, cluster.namespace)
    policy = SchedulingPolicy.from_object(document)

    table = demoing.placement_table(sandbox, policy, pods_by_node)
    rows = table_rows(table)
    assert rows[0] == [
        "NODE",
        "PODS",
        "cpu (w4)",
        "memory (w3)",
        "diskIO (w2)",
        "diskSpace (w1)",
        "network (w1)",
        "TOTAL",
    ]
    shown = {row[0]: int(row[1]) for row in rows[1:]}
    placed = Counter(node for node in cluster.node_of().values() if node)
    assert shown == {node: placed[node] for node in sandbox.node_names}
    assert sum(shown.values()) == demoing.DEMO_REPLICAS
    # Ranked by total, the demo pods' requests included (they started too recently for the metrics to
    # show them): the busiest node last and, far behind the others, given nothing.
    totals = [float(row[-1]) for row in rows[1:]]
    assert totals == sorted(totals, reverse=True)
    assert rows[-1][0] == "node-0"
    assert shown["node-0"] == 0

    pod, node = next((name, node) for name, node in cluster.node_of().items() if node == "node-1")
    decision = eventually(
        lambda: recorded_decision(cluster, policy_name, pod),
        lambda found: found is not None,
        what=f"the decision for {pod} in the policy's status",
    )
    assert decision is not None
    generation = cluster.sandbox.kubectl(
        "get", "schedulingpolicy", policy_name, "-o", "jsonpath={.metadata.generation}"
    ).stdout
    text = promsched(sandbox, "explain", f"{cluster.namespace}/{pod}")
    lines = text.splitlines()
    assert f"pod         {cluster.namespace}/{pod} (on {node})" in lines
    assert f"generation  {generation} (the policy has not changed since)" in lines
    assert f"chosen      {node}" in lines
    assert f"source      status of SchedulingPolicy {policy_name}" in lines
    rows = table_rows(text)
    weights = [f"{plugin.name} (w{plugin.weight})" for plugin in policy.spec.plugins]
    assert rows[0] == ["NODE", *weights, "TOTAL"]
    chosen = next(entry for entry in decision["topNodes"] if entry["node"] == node)
    assert [f"{node} *"] + [
        f"{format_value(plugin['raw'])} → {format_value(plugin['score'])}" for plugin in chosen["plugins"]
    ] + [f"{chosen['total']:.1f}"] in rows


def test_score_ranks_the_least_loaded_node_first(sandbox: Sandbox) -> None:
    # The demo's pods loaded their nodes while they ran, and a 1m CPU window remembers them a while.
    wait_for_profile_loads(sandbox)
    text = promsched(
        sandbox,
        "score",
        "--policy",
        str(EXAMPLES / "sandbox-policy.yaml"),
        "--prometheus-url",
        sandbox.prometheus_url,
        "--pod",
        str(EXAMPLES / "deployment.yaml"),
    )
    assert "result    promsched would bind the pod to node-1 (dry run: nothing is bound)" in text
    rows = table_rows(text)
    assert (rows[1][0], rows[-1][0]) == ("node-1 *", "node-0")
    assert "Problems:" not in text
