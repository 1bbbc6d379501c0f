"""What the differential e2e tests share: the sandbox's own kube-scheduler under a scheduler name of its
own, and the pods, objects and messages both schedulers are compared on."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml

from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor
from support.clusters import Cluster, pod_manifest

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
CPU = [{"name": "cpu", "weight": 1, "timeRange": "1m"}]


@contextmanager
def running_kube_scheduler(sandbox: Sandbox) -> Iterator[str]:
    """The sandbox's own kube-scheduler, serving a scheduler name of its own; yields that name."""
    name = f"kube-scheduler-{uuid.uuid4().hex[:6]}"
    config = sandbox.directory / f"{name}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(sandbox.kubeconfig)},
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": name}],
            }
        )
    )
    supervisor = Supervisor(sandbox.directory)
    supervisor.spawn(name, [sandbox.binary("kube-scheduler"), f"--config={config}", "--secure-port=0"])
    try:
        yield name
    finally:
        supervisor.stop(name)
        config.unlink(missing_ok=True)


def pod(
    cluster: Cluster, name: str, labels: dict[str, str], scheduler: str = "", cpu: str = "100m", **spec: Any
) -> dict[str, Any]:
    return pod_manifest(
        name, cluster.namespace, scheduler or cluster.scheduler_name, cpu=cpu, labels=labels, **spec
    )


def create(cluster: Cluster, *documents: dict[str, Any]) -> None:
    cluster.sandbox.kubectl(
        "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(documents)})
    )


def in_nodes(key: str, *values: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}


def failed_scheduling(cluster: Cluster, pod_name: str) -> str:
    messages = [e["message"] for e in cluster.events(pod_name) if e["reason"] == "FailedScheduling"]
    return messages[-1] if messages else ""


def without_preemption(message: str) -> str:
    """kube's text up to its preemption report, which promsched's differs from."""
    return message.split(" preemption:")[0]
