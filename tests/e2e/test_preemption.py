"""Preemption on the sandbox, side by side with the real kube-scheduler: the same cluster, the same pods,
one preemptor at a time (kube-scheduler's first, then promsched's), compared node, victims, events and
words.

node-0, node-1 and node-2 (3900m each) are filled with pods bound directly (nobody's scheduling) whose
priorities and a PodDisruptionBudget make one node the only right answer by kube's criteria:
node-0's pod is guarded by a budget that allows no disruption, node-1's has priority 50, and node-2
frees enough room by evicting its priority-20 pod alone (the priority-30 one is reprieved).
"""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any

import pytest

from promsched.sandbox.control_plane.clusters import Sandbox
from support.clusters import Cluster, Operator
from support.differential import CPU, HOSTNAME, create, failed_scheduling, in_nodes, pod
from support.polling import eventually
from support.preemption import found, preemption_note

pytestmark = pytest.mark.e2e

CANDIDATE_NODES = ("node-0", "node-1", "node-2")
# (name, node, priority class, cpu, labels): what the three candidate nodes run.
FILLERS = (
    ("guarded", "node-0", "p10", "3500m", {"app": "guarded"}),
    ("mid", "node-1", "p50", "3500m", {}),
    ("low-a", "node-2", "p20", "1800m", {}),
    ("low-b", "node-2", "p30", "1700m", {}),
)
FILTERED = "0/6 nodes are available: 3 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector."
PRIORITIES = {"p10": 10, "p20": 20, "p30": 30, "p50": 50, "p1000": 1000}


def bound_pod(
    cluster: Cluster, name: str, node: str, priority_class: str, cpu: str, labels: dict[str, str]
) -> dict[str, Any]:
    document = pod(cluster, name, labels, cpu=cpu, priorityClassName=priority_class, nodeName=node)
    del document["spec"]["schedulerName"]  # bound by its creator: no scheduler's pod
    return document


def live_pods(cluster: Cluster, prefix: str) -> dict[str, str | None]:
    """Pods of the round not being deleted, by name, with their node."""
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName")
        for p in cluster.pods()
        if p["metadata"]["name"].startswith(prefix) and not p["metadata"].get("deletionTimestamp")
    }


def preempted_events(cluster: Cluster, victim: str) -> list[dict[str, Any]]:
    return [e for e in cluster.events(victim) if e["reason"] == "Preempted"]


def run_round(
    sandbox: Sandbox, cluster: Cluster, prefix: str, scheduler: str, classes: dict[str, str]
) -> dict[str, Any]:
    """Fill the candidate nodes, add a budget and the preemptor; what came of it."""
    fillers = [
        bound_pod(cluster, f"{prefix}-{name}", node, classes[level], cpu, {**labels, "round": prefix})
        for name, node, level, cpu, labels in FILLERS
    ]
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"{prefix}-guarded", "namespace": cluster.namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded", "round": prefix}}},
    }
    create(cluster, *fillers, budget)
    eventually(
        lambda: json.loads(
            sandbox.kubectl("get", "pdb", "-n", cluster.namespace, f"{prefix}-guarded", "-o", "json").stdout
        ).get("status", {}),
        lambda status: status.get("currentHealthy") == status.get("desiredHealthy") == 1,
        what="the disruption controller's count of the guarded pod",
    )
    eventually(
        lambda: [
            p["status"].get("phase") for p in cluster.pods() if p["metadata"]["name"].startswith(prefix)
        ],
        lambda phases: phases == ["Running"] * len(FILLERS),
        what="fillers running",
    )
    preemptor = pod(
        cluster,
        f"{prefix}-urgent",
        {"round": prefix},
        scheduler,
        cpu="2",
        priorityClassName=classes["p1000"],
        affinity={"nodeAffinity": in_nodes(HOSTNAME, *CANDIDATE_NODES)},
    )
    create(cluster, preemptor)
    urgent = f"{prefix}-urgent"
    placed = eventually(
        lambda: live_pods(cluster, prefix),
        lambda pods: bool(pods.get(urgent)),
        timeout=120,
        what=f"{urgent} bound after preempting",
    )
    gone = sorted(name for name, *_ in FILLERS if f"{prefix}-{name}" not in placed)
    events = {
        victim: eventually(
            lambda victim=victim: preempted_events(cluster, f"{prefix}-{victim}"),
            bool,
            what="Preempted event",
        )
        for victim in gone
    }
    return {
        "node": placed[urgent],
        "victims": gone,
        "message": failed_scheduling(cluster, urgent),
        "notes": {victim: [e["message"] for e in found] for victim, found in events.items()},
        "uid": next(p["metadata"]["uid"] for p in cluster.pods() if p["metadata"]["name"] == urgent),
    }


def priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def test_preemption_on_a_full_cluster_with_a_budget_picks_kubes_node_and_victims(
    sandbox: Sandbox, cluster: Cluster, kube_scheduler: str
) -> None:
    cluster.policy(CPU)
    classes = {level: f"{cluster.namespace}-{level}" for level in PRIORITIES}
    create(cluster, *(priority_class(name, PRIORITIES[level]) for level, name in classes.items()))
    try:
        results = {}
        for prefix, scheduler in (("kube", kube_scheduler), ("ours", cluster.scheduler_name)):
            results[prefix] = run_round(sandbox, cluster, prefix, scheduler, classes)
            # Only one round's pods on the nodes at a time.
            sandbox.kubectl("delete", "pods", "-n", cluster.namespace, "-l", f"round={prefix}", "--wait=true")
            sandbox.kubectl("delete", "pdb", "-n", cluster.namespace, f"{prefix}-guarded")
        kube, ours = results["kube"], results["ours"]
        assert kube["node"] == "node-2"
        assert kube["victims"] == ["low-a"]
        assert (ours["node"], ours["victims"]) == (kube["node"], kube["victims"])
        for result in (kube, ours):
            assert result["notes"] == {"low-a": [f"Preempted by pod {result['uid']} on node node-2"]}
        # Preemption succeeded: FailedScheduling says so after the filters' words.
        assert kube["message"] == FILTERED + found("node-2", 1)
        assert ours["message"] == kube["message"]
    finally:
        sandbox.kubectl("delete", "priorityclass", *classes.values(), "--ignore-not-found")


def test_a_pod_that_cannot_preempt_is_told_why_in_kubes_words(
    sandbox: Sandbox, cluster: Cluster, kube_scheduler: str
) -> None:
    cluster.policy(CPU)
    fill = [
        pod(cluster, f"fill-{node}", {"round": "fill"}, cpu="3500m", nodeName=node)
        for node in CANDIDATE_NODES
    ]
    for document in fill:
        del document["spec"]["schedulerName"]
    create(cluster, *fill)
    # preemptionPolicy comes from the class (priority admission refuses one set in the pod).
    never = f"{cluster.namespace}-never"
    create(cluster, priority_class(never, 1000, preemptionPolicy="Never"))
    messages = {}
    for prefix, scheduler in (("kube", kube_scheduler), ("ours", cluster.scheduler_name)):
        for name, spec in (("peer", {}), ("polite", {"priorityClassName": never})):
            create(
                cluster,
                pod(
                    cluster,
                    f"{prefix}-{name}",
                    {},
                    scheduler,
                    cpu="2",
                    affinity={"nodeAffinity": in_nodes(HOSTNAME, *CANDIDATE_NODES)},
                    **spec,
                ),
            )
            messages[(prefix, name)] = eventually(
                lambda prefix=prefix, name=name: failed_scheduling(cluster, f"{prefix}-{name}"),
                bool,
                what=f"{prefix}-{name} FailedScheduling",
            )
    assert messages[("kube", "peer")] == FILTERED + preemption_note(
        "0/6 nodes are available: 3 No preemption victims found for incoming pod, "
        "3 Preemption is not helpful for scheduling."
    )
    assert messages[("ours", "peer")] == messages[("kube", "peer")]
    assert messages[("kube", "polite")] == FILTERED + preemption_note(
        "not eligible due to preemptionPolicy=Never."
    )
    assert messages[("ours", "polite")] == messages[("kube", "polite")]
    sandbox.kubectl("delete", "priorityclass", never, "--ignore-not-found")


def counter(operator: Operator, sample: str) -> float:
    """A sample of the operator's /metrics (0 before it is first counted)."""
    with urllib.request.urlopen(f"{operator.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


REFUSED = 'promsched_preemption_evictions_total{result="refused"}'
ATTEMPTS = "promsched_preemption_attempts_total"


def test_a_victim_its_budget_refuses_is_not_asked_again_and_keeps_no_disruption_mark(
    sandbox: Sandbox, operator: Operator, cluster: Cluster
) -> None:
    """The preemptor fits on node-0 only by evicting a pod whose budget allows no disruption: the
    Eviction API refuses it once, the victim's DisruptionTarget mark is taken back, and the preemptor's
    retries send no other eviction until the budget allows one."""
    cluster.policy(CPU)
    low, high = f"{cluster.namespace}-p10", f"{cluster.namespace}-p1000"
    create(cluster, priority_class(low, 10), priority_class(high, 1000))
    try:
        guarded = bound_pod(cluster, "guarded", "node-0", low, "3500m", {"app": "guarded"})
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded", "namespace": cluster.namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        }
        create(cluster, guarded, budget)
        eventually(
            lambda: json.loads(
                sandbox.kubectl("get", "pdb", "-n", cluster.namespace, "guarded", "-o", "json").stdout
            ).get("status", {}),
            lambda status: status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0,
            what="the disruption controller's count of the guarded pod",
        )
        refused = counter(operator, REFUSED)
        urgent = pod(
            cluster,
            "urgent",
            {},
            cpu="2",
            priorityClassName=high,
            affinity={"nodeAffinity": in_nodes(HOSTNAME, "node-0")},
        )
        create(cluster, urgent)
        eventually(lambda: counter(operator, REFUSED), lambda value: value == refused + 1, what="a refusal")
        attempts = counter(operator, ATTEMPTS)
        # Three more tries of the preemptor (each after its backoff), none of which asks again.
        eventually(
            lambda: counter(operator, ATTEMPTS), lambda value: value >= attempts + 3, what="the retries"
        )
        assert counter(operator, REFUSED) == refused + 1
        pods = {p["metadata"]["name"]: p for p in cluster.pods()}
        assert pods["urgent"]["status"].get("nominatedNodeName") == "node-0"
        marks = [
            condition
            for condition in pods["guarded"]["status"].get("conditions", [])
            if condition["type"] == "DisruptionTarget" and condition["status"] == "True"
        ]
        assert marks == []
        assert not pods["guarded"]["metadata"].get("deletionTimestamp")
        # The budget allows one disruption: the next try evicts the pod, and the preemptor lands.
        sandbox.kubectl(
            "patch",
            "pdb",
            "guarded",
            "-n",
            cluster.namespace,
            "--type=merge",
            "-p",
            '{"spec":{"minAvailable":0}}',
        )
        eventually(
            lambda: cluster.node_of(),
            lambda nodes: nodes.get("urgent") == "node-0" and "guarded" not in nodes,
            timeout=120,
            what="urgent bound where guarded was",
        )
    finally:
        sandbox.kubectl("delete", "priorityclass", low, high, "--ignore-not-found")
