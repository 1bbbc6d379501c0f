"""The operator and a per-test namespace on the sandbox, for the e2e tier."""

from __future__ import annotations

import json
import uuid
from typing import Any

from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor
from promsched.sandbox.demoing import start_scheduler
from support.polling import eventually

OPERATOR = "promsched-e2e"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def pod_manifest(
    name: str,
    namespace: str,
    scheduler: str,
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    image: str = PAUSE_IMAGE,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod to create on the sandbox, one container asking for `cpu` and `memory`; `spec` adds or
    replaces spec fields (camelCase, as in the API)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            **({"labels": labels} if labels is not None else {}),
        },
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "c", "image": image, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ],
            **spec,
        },
    }


def policy_manifest(
    name: str,
    scheduler: str,
    prometheus_url: str,
    *,
    plugins: list[dict[str, Any]] | None = None,
    auth: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A SchedulingPolicy to apply on the sandbox, refreshing every 2 s (default plugin: cpu over 1m);
    `auth` is its Prometheus auth, `spec` adds or replaces spec fields (camelCase, as in the API)."""
    prometheus = {"url": prometheus_url, "timeout": "5s", **({"auth": auth} if auth else {})}
    return {
        "apiVersion": "promsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "prometheus": prometheus,
            "refreshInterval": "2s",
            "plugins": [{"name": "cpu", "weight": 1, "timeRange": "1m"}] if plugins is None else plugins,
            **spec,
        },
    }


class Operator:
    """`promsched run` as a sandbox process; `url` serves /metrics, /healthz and /readyz."""

    def __init__(self, sandbox: Sandbox, name: str = OPERATOR, extra: tuple[str, ...] = ()) -> None:
        self.sandbox, self.name, self.extra = sandbox, name, extra
        self.url = ""

    def start(self) -> Operator:
        self.url = start_scheduler(self.sandbox, lambda _line: None, name=self.name, extra=self.extra)
        return self

    def stop(self) -> bool:
        return Supervisor(self.sandbox.directory).stop(self.name)

    def pid(self) -> int:
        process = Supervisor(self.sandbox.directory).get(self.name)
        assert process is not None, f"{self.name} was never started"
        return process.pid


class Cluster:
    """kubectl helpers for one test: its own namespace and scheduler name, cleaned up afterwards."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        suffix = uuid.uuid4().hex[:6]
        self.namespace = f"e2e-{suffix}"
        self.scheduler_name = f"promsched-{suffix}"
        self.policies: list[str] = []

    def apply(self, document: dict[str, Any]) -> None:
        self.sandbox.kubectl("apply", "-f", "-", input=json.dumps(document))

    def budget_allowing(self, name: str, disruptions: int) -> None:
        """Wait until the disruption controller has computed PodDisruptionBudget `name`'s status and it
        allows `disruptions` (until then the Eviction API refuses on a status it has not written)."""
        eventually(
            lambda: json.loads(
                self.sandbox.kubectl("get", "pdb", name, "-n", self.namespace, "-o", "json").stdout
            ).get("status", {}),
            lambda status: (
                status.get("observedGeneration") and status.get("disruptionsAllowed") == disruptions
            ),
            what=f"PodDisruptionBudget {name}'s status",
        )

    def policy(self, plugins: list[dict[str, Any]], **spec: Any) -> str:
        name = f"{self.scheduler_name}-{len(self.policies)}"
        self.apply(
            policy_manifest(
                name,
                self.scheduler_name,
                self.sandbox.prometheus_url,
                plugins=plugins,
                **{"staleAfter": "1m", **spec},
            )
        )
        self.policies.append(name)
        return name

    def pod(
        self, name: str, *, cpu: str = "100m", memory: str = "64Mi", scheduler: str | None = None, **spec: Any
    ) -> None:
        self.apply(
            pod_manifest(
                name,
                self.namespace,
                scheduler or self.scheduler_name,
                cpu=cpu,
                memory=memory,
                labels={"e2e": "true"},
                **spec,
            )
        )

    def pods(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(
            self.sandbox.kubectl("get", "pods", "-n", self.namespace, "-o", "json").stdout
        )["items"]
        return items

    def node_of(self) -> dict[str, str | None]:
        return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in self.pods()}

    def events(self, pod: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(
            self.sandbox.kubectl(
                "get",
                "events",
                "-n",
                self.namespace,
                "--field-selector",
                f"involvedObject.name={pod}",
                "-o",
                "json",
            ).stdout
        )["items"]
        return items

    def status(self, policy: str) -> dict[str, Any]:
        obj = json.loads(self.sandbox.kubectl("get", "schedulingpolicy", policy, "-o", "json").stdout)
        status: dict[str, Any] = obj.get("status") or {}
        return status

    def cleanup(self) -> None:
        # Waiting keeps tests independent: the next one must not find this one's pods on the nodes.
        self.sandbox.kubectl("delete", "namespace", self.namespace, "--ignore-not-found", "--timeout=180s")
        for policy in self.policies:
            self.sandbox.kubectl("delete", "schedulingpolicy", policy, "--ignore-not-found")
