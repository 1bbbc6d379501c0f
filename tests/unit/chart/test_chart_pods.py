"""The operator's pods as the chart renders them: the Pod Security Standard "restricted" unless the
security contexts are overridden, probes on the operator's endpoints, placement, extra arguments and
environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rendering import FULLNAME, NAMESPACE, Manifest, container, deployment, needs_helm, render

from promsched.cli import parse

pytestmark = needs_helm

RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
}


def pods(objects: Manifest) -> list[dict[str, Any]]:
    """The operator's pod template and the helm test pod: both run the operator's image."""
    return [
        deployment(objects)["spec"]["template"]["spec"],
        objects[("Pod", f"{NAMESPACE}/{FULLNAME}-test")]["spec"],
    ]


def test_the_scheduler_and_test_pods_meet_the_restricted_standard(tmp_path: Path) -> None:
    for pod in pods(render(tmp_path)):
        assert RESTRICTED_POD.items() <= pod["securityContext"].items()
        assert pod["securityContext"]["runAsUser"] != 0
        for each in pod["containers"]:
            assert each["securityContext"] == RESTRICTED_CONTAINER
        assert not [volume for volume in pod.get("volumes", []) if "hostPath" in volume]


def test_probes_ask_the_operators_endpoints(tmp_path: Path) -> None:
    probes = container(render(tmp_path))

    assert probes["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert probes["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert probes["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}
    assert probes["livenessProbe"]["failureThreshold"] == 3


def test_placement_values_reach_the_pod(tmp_path: Path) -> None:
    values = {
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        "priorityClassName": "system-cluster-critical",
        "resources": {"requests": {"cpu": "250m"}},
    }

    pod = deployment(render(tmp_path, values))["spec"]["template"]["spec"]

    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName"):
        assert pod[key] == values[key]
    assert pod["containers"][0]["resources"]["requests"]["cpu"] == "250m"


def test_extra_args_come_after_the_charts_and_override_them(tmp_path: Path) -> None:
    extra = ["--watch-inactivity-timeout=120", "--log-level=DEBUG"]

    args = container(render(tmp_path, {"extraArgs": extra}))["args"]

    assert args[-2:] == extra
    assert "--log-level=INFO" in args  # the chart's, replaced by the later flag
    parsed = parse(["run", *args])
    assert (parsed["watch_inactivity_timeout"], parsed["log_level"]) == (120.0, "DEBUG")


def test_env_reaches_the_operators_container(tmp_path: Path) -> None:
    env = [
        {"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]

    assert container(render(tmp_path, {"env": env}))["env"] == env
    assert "env" not in container(render(tmp_path))


def test_the_security_contexts_can_be_overridden_key_by_key(tmp_path: Path) -> None:
    # OpenShift's restricted SCC assigns the UID and GID itself: null drops the chart's.
    values = {
        "podSecurityContext": {"runAsUser": None, "runAsGroup": None, "fsGroup": 1000},
        "securityContext": {"readOnlyRootFilesystem": None, "seLinuxOptions": {"level": "s0:c1"}},
    }

    for pod in pods(render(tmp_path, values)):
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
            "fsGroup": 1000,
        }
        [each] = pod["containers"]
        assert each["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seLinuxOptions": {"level": "s0:c1"},
        }
