"""The Helm chart against the sandbox's real API server.

`helm lint --strict`; the rendered chart accepted by a server-side dry run under the Pod Security Standard
"restricted"; `helm install`, `upgrade` and `uninstall` leaving nothing behind; and the least-privilege
proof: the real operator, holding nothing but a token of the chart's ServiceAccount and the chart's RBAC,
schedules pods, while `kubectl auth can-i` shows that identity is denied everything else.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from promsched.api.crds import CRD_NAME
from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.control_plane.supervising import Supervisor
from promsched.sandbox.demoing import start_scheduler
from support.chart_values import installable
from support.clusters import OPERATOR, Operator, pod_manifest, policy_manifest
from support.polling import eventually

pytestmark = pytest.mark.integration

REPO = Path(__file__).parents[2]
CHART = REPO / "charts" / "promsched"
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
# The sandbox serves no ServiceMonitor CRD (prometheus-operator's), so the API server cannot judge one;
# the unit tests check what the chart renders for it.
NO_SERVICE_MONITOR = {"serviceMonitor": {"enabled": False}}
RBAC_OPERATOR = "promsched-chart-rbac"
SCHEDULED_WITHIN = 60.0


def _suffix() -> str:
    return uuid.uuid4().hex[:6]


def _documents(manifest: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(manifest) if doc]


@dataclass
class Helm:
    """The sandbox's helm, with its admin kubeconfig and a private values folder."""

    sandbox: Sandbox
    folder: Path

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [self.sandbox.binary("helm"), "--kubeconfig", str(self.sandbox.kubeconfig), *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args[:2])} failed ({result.returncode}):\n{result.stderr}")
        return result

    def values(self, values: dict[str, Any]) -> str:
        path = self.folder / f"values-{_suffix()}.yaml"
        path.write_text(yaml.safe_dump(values))
        return str(path)

    def template(self, release: str, namespace: str, values: dict[str, Any], *extra: str) -> str:
        """The manifests of an install: `values` over the least a user must set."""
        return self.run(
            "template", release, str(CHART), "-n", namespace, "-f", self.values(installable(values)), *extra
        ).stdout


class Namespaces:
    """Namespaces made for a test, deleted (and waited for) afterwards: no pod of theirs stays on a node."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.made: list[str] = []

    def make(self, prefix: str, labels: dict[str, str] | None = None) -> str:
        name = f"{prefix}-{_suffix()}"
        manifest = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels or {}},
        }
        self.sandbox.kubectl("create", "-f", "-", input=json.dumps(manifest))
        self.made.append(name)
        return name

    def delete_all(self) -> None:
        if self.made:
            self.sandbox.kubectl("delete", "namespace", *self.made, "--ignore-not-found", "--timeout=180s")


@pytest.fixture(scope="module")
def crd(sandbox: Sandbox) -> None:
    """The chart's CRD, applied as `helm install` would and left in place (helm keeps CRDs by design)."""
    sandbox.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    sandbox.wait_established(CRD_NAME)


@pytest.fixture(scope="module")
def helm(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(sandbox, tmp_path_factory.mktemp("chart"))


@pytest.fixture
def namespaces(sandbox: Sandbox) -> Iterator[Namespaces]:
    made = Namespaces(sandbox)
    try:
        yield made
    finally:
        made.delete_all()


def _everything(secrets_namespace: str, scheduling_namespace: str, prometheus_url: str) -> dict[str, Any]:
    """Values that turn every optional part of the chart on (but the ServiceMonitor)."""
    suffix = _suffix()
    values = {
        **NO_SERVICE_MONITOR,
        "replicas": 2,
        "namespaces": [scheduling_namespace],
        "prometheus": {
            "allowedHosts": ["127.0.0.1"],
            "secretRefs": [{"namespace": secrets_namespace, "name": "prometheus-token"}],
        },
        "podDisruptionBudget": {"minAvailable": 1},
        "grafanaDashboard": {"enabled": True},
        "networkPolicy": {
            "enabled": True,
            "metricsFrom": [{"namespaceSelector": {"matchLabels": {"monitoring": "true"}}}],
            "restrictEgress": True,
            "egress": [{"ports": [{"port": 6443, "protocol": "TCP"}]}],
        },
        "defaultPolicy": {
            "enabled": True,
            "name": f"chart-default-{suffix}",
            "spec": {
                "schedulerName": f"chart-default-{suffix}",
                "prometheus": {"url": prometheus_url, "timeout": "5s"},
                "plugins": [{"name": "cpu", "weight": 1, "timeRange": "1m"}],
            },
        },
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "scheduler", "effect": "NoSchedule"}
        ],
        "nodeSelector": {"kubernetes.io/os": "linux"},
    }
    return installable(values)


# --- lint and dry run -------------------------------------------------------------------------------


def test_the_chart_lints_strictly_with_defaults_and_with_every_option(helm: Helm, sandbox: Sandbox) -> None:
    everything = _everything("monitoring", "apps", sandbox.prometheus_url)
    everything["serviceMonitor"] = {"enabled": True, "labels": {"release": "prometheus"}}
    everything["prometheusRule"] = {"enabled": True, "labels": {"release": "prometheus"}}
    for values in ({}, everything):
        result = helm.run("lint", "--strict", str(CHART), "-f", helm.values(values))

        assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout
        assert "[WARNING]" not in result.stdout, result.stdout
        assert "[ERROR]" not in result.stdout, result.stdout


@pytest.mark.parametrize("variant", ["defaults", "everything"])
def test_the_rendered_chart_passes_a_server_side_dry_run_as_pod_security_restricted(
    variant: str, crd: None, helm: Helm, sandbox: Sandbox, namespaces: Namespaces
) -> None:
    restricted = {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
    }
    release_namespace = namespaces.make("chart-dry", restricted)
    values = (
        _everything(
            namespaces.make("chart-dry-secrets"), namespaces.make("chart-dry-apps"), sandbox.prometheus_url
        )
        if variant == "everything"
        else NO_SERVICE_MONITOR
    )
    # PodSecurity admission must be live for its silence to mean anything: a privileged pod is refused.
    privileged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged", "namespace": release_namespace},
        "spec": {"containers": [{"name": "c", "image": "pause", "securityContext": {"privileged": True}}]},
    }
    refused = sandbox.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=json.dumps(privileged), check=False
    )
    assert refused.returncode != 0
    assert "violates PodSecurity" in refused.stderr, refused.stderr

    manifest = helm.template("chart-dry", release_namespace, values, "--include-crds")
    result = sandbox.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        "-",
        input=manifest,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    # PodSecurity only warns about a Deployment's pod template; any warning is a violation.
    assert "Warning" not in result.stderr, result.stderr
    documents = _documents(manifest)
    assert len(result.stdout.splitlines()) == len(documents), result.stdout
    rendered = {doc["kind"] for doc in documents}
    if variant == "everything":
        assert rendered >= RBAC_KINDS | {
            "Deployment",
            "Service",
            "PodDisruptionBudget",
            "NetworkPolicy",
            "ConfigMap",
        }
        assert {"SchedulingPolicy", "CustomResourceDefinition", "Pod"} <= rendered


def test_the_alerts_pass_promtool_check_rules(helm: Helm, tmp_path: Path) -> None:
    # promtool comes with the sandbox's Prometheus: here it must be there, never skipped.
    values = {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}
    documents = _documents(helm.template("alerts", "monitoring", values))
    [rule] = [doc for doc in documents if doc["kind"] == "PrometheusRule"]
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))

    result = subprocess.run(
        ["promtool", "check", "rules", str(rules)], capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 5 rules found" in result.stdout


def test_applying_an_enforce_policy_for_default_scheduler_warns(
    crd: None, helm: Helm, sandbox: Sandbox
) -> None:
    documents = _documents(helm.template("warns", "default", {}))
    admission = [doc for doc in documents if doc["kind"].startswith("ValidatingAdmissionPolicy")]
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": admission})
    sandbox.kubectl("apply", "-f", "-", input=manifest)
    enforce, shadow = f"warns-enforce-{_suffix()}", f"warns-shadow-{_suffix()}"

    def apply(name: str, mode: str, *options: str) -> str:
        policy = {
            "apiVersion": "promsched.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": name},
            "spec": {
                "schedulerName": "default-scheduler",
                "mode": mode,
                "prometheus": {"url": sandbox.prometheus_url},
                "plugins": [{"name": "cpu"}],
            },
        }
        return sandbox.kubectl("apply", *options, "-f", "-", input=json.dumps(policy)).stderr

    try:
        # The API server takes a new admission policy up within a moment.
        eventually(
            lambda: apply(enforce, "Enforce", "--dry-run=server"),
            lambda text: "Warning" in text,
            timeout=30,
            what="the admission policy in effect",
        )
        warning = apply(enforce, "Enforce")
        assert "claims schedulerName default-scheduler in Enforce mode" in warning
        assert "Use mode: Shadow" in warning
        assert "Warning" not in apply(shadow, "Shadow")
    finally:
        sandbox.kubectl("delete", "schedulingpolicy", enforce, shadow, "--ignore-not-found")
        sandbox.kubectl("delete", "-f", "-", "--ignore-not-found", input=manifest)


# --- install, upgrade, uninstall --------------------------------------------------------------------


def _objects(manifest: str) -> set[tuple[str, str, str]]:
    return {
        (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])
        for doc in _documents(manifest)
    }


def _exists(sandbox: Sandbox, kind: str, namespace: str, name: str) -> bool:
    scope = ("-n", namespace) if namespace else ()
    result = sandbox.kubectl("get", kind, name, *scope, "-o", "name", check=False)
    if result.returncode != 0 and "NotFound" not in result.stderr:
        raise AssertionError(f"kubectl get {kind} {name}: {result.stderr}")
    return result.returncode == 0


def test_install_upgrade_and_uninstall_are_clean_and_leave_only_the_crd(
    crd: None, helm: Helm, sandbox: Sandbox, namespaces: Namespaces
) -> None:
    release_namespace = namespaces.make("chart-life")
    values = _everything(
        namespaces.make("chart-life-secrets"), namespaces.make("chart-life-apps"), sandbox.prometheus_url
    )
    release = f"life-{_suffix()}"
    common = (release, str(CHART), "-n", release_namespace, "-f", helm.values(values))

    installed = helm.run("install", *common)
    assert installed.stderr == "", installed.stderr
    first = helm.run("get", "manifest", release, "-n", release_namespace).stdout
    for kind, namespace, name in _objects(first):
        assert _exists(sandbox, kind, namespace, name), f"{kind} {namespace}/{name} was not installed"

    # One replica: no election, so no PDB and no Lease Role, and the Deployment recreates its pod.
    upgraded = helm.run("upgrade", *common, "--set", "replicas=1")
    assert upgraded.stderr == "", upgraded.stderr
    second = helm.run("get", "manifest", release, "-n", release_namespace).stdout
    status = json.loads(helm.run("status", release, "-n", release_namespace, "-o", "json").stdout)
    assert (status["info"]["status"], status["version"]) == ("deployed", 2)
    dropped = _objects(first) - _objects(second)
    assert {kind for kind, _, _ in dropped} == {"PodDisruptionBudget", "Role", "RoleBinding"}, dropped
    for kind, namespace, name in dropped:
        assert not _exists(sandbox, kind, namespace, name), f"{kind} {namespace}/{name} outlived the upgrade"
    deployment = json.loads(
        sandbox.kubectl("get", "deployment", "-n", release_namespace, "-o", "json").stdout
    )["items"][0]
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    assert "--leader-elect" not in deployment["spec"]["template"]["spec"]["containers"][0]["args"]

    uninstalled = helm.run("uninstall", release, "-n", release_namespace, "--wait")
    assert uninstalled.stderr == "", uninstalled.stderr
    left = [obj for obj in _objects(first) | _objects(second) if _exists(sandbox, *obj)]
    assert left == [], f"left behind by helm uninstall: {left}"
    # The Deployment's ReplicaSets and pods go by garbage collection, after helm is done.
    kinds = "all,role,rolebinding,clusterrole,clusterrolebinding,serviceaccount,networkpolicy,pdb,spol"
    eventually(
        lambda: (
            sandbox.kubectl(
                "get", kinds, "-A", "-l", f"app.kubernetes.io/instance={release}", "-o", "name"
            ).stdout
        ),
        lambda names: names == "",
        what=f"every object labelled with release {release} gone",
    )
    assert _exists(sandbox, "customresourcedefinition", "", CRD_NAME), "helm keeps CRDs by design"


# --- least privilege: the real operator with only the chart's permissions -------------------------


@dataclass
class ChartIdentity:
    """The chart's RBAC applied for one release; the operator's identity and the namespaces it involves."""

    release: str
    namespace: str  # the release namespace: ServiceAccount and Lease
    secrets_namespace: str  # holds `granted` (in prometheus.secretRefs) and `withheld` (not)
    work_namespace: str  # where the test's pods are
    service_account: str
    lease: str
    deployment_args: list[str]
    hook_command: list[str]
    granted_secret: str = "prometheus-token"
    withheld_secret: str = "other-token"

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


def _secret(namespace: str, name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": {"token": f"{name}-value"},
        }
    )


@pytest.fixture(scope="module")
def chart_identity(crd: None, helm: Helm, sandbox: Sandbox) -> Iterator[ChartIdentity]:
    """The chart's ServiceAccount, ClusterRole, Roles and bindings as `helm template` renders them for two
    replicas (so leader election and its Lease Role are on) and one allowed Secret."""
    made = Namespaces(sandbox)
    release = f"rbac-{_suffix()}"
    namespace = made.make("chart-rbac")
    secrets_namespace = made.make("chart-rbac-secrets")
    work_namespace = made.make("chart-rbac-work")
    values = {
        "replicas": 2,
        "prometheus": {
            "allowedHosts": ["127.0.0.1"],
            "secretRefs": [{"namespace": secrets_namespace, "name": "prometheus-token"}],
        },
    }
    documents = _documents(helm.template(release, namespace, values))
    rbac = [doc for doc in documents if doc["kind"] in RBAC_KINDS]
    rbac_manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac})
    deployment = next(doc for doc in documents if doc["kind"] == "Deployment")
    hook = next(doc for doc in documents if doc["kind"] == "Pod")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    for secret in ("prometheus-token", "other-token"):
        sandbox.kubectl("create", "-f", "-", input=_secret(secrets_namespace, secret))
    sandbox.kubectl("apply", "-f", "-", input=rbac_manifest)
    try:
        yield ChartIdentity(
            release=release,
            namespace=namespace,
            secrets_namespace=secrets_namespace,
            work_namespace=work_namespace,
            service_account=deployment["spec"]["template"]["spec"]["serviceAccountName"],
            lease=next(arg for arg in container["args"] if arg.startswith("--lease-name=")).split("=", 1)[1],
            deployment_args=container["args"],
            hook_command=hook["spec"]["containers"][0]["command"],
        )
    finally:
        sandbox.kubectl("delete", "-f", "-", "--ignore-not-found", input=rbac_manifest)
        made.delete_all()


def _token_kubeconfig(sandbox: Sandbox, identity: ChartIdentity, folder: Path) -> Path:
    """A kubeconfig holding only a token of the chart's ServiceAccount (no client certificate)."""
    admin = yaml.safe_load(sandbox.kubeconfig.read_text())
    cluster = next(c for c in admin["clusters"] if c["name"] == admin["contexts"][0]["context"]["cluster"])
    token = sandbox.kubectl(
        "create", "token", identity.service_account, "-n", identity.namespace, "--duration=1h"
    ).stdout.strip()
    path = folder / "chart-serviceaccount.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "sandbox", "cluster": cluster["cluster"]}],
                "users": [{"name": identity.service_account, "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "chart",
                        "context": {"cluster": "sandbox", "user": identity.service_account},
                    }
                ],
                "current-context": "chart",
            }
        )
    )
    path.chmod(0o600)
    return path


@dataclass
class ChartOperator:
    url: str
    kubeconfig: Path
    log: Callable[[], str]


@pytest.fixture(scope="module")
def chart_operator(
    sandbox: Sandbox, chart_identity: ChartIdentity, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ChartOperator]:
    """`promsched run` with the Deployment's own arguments and the ServiceAccount's token as its only
    credential. Any other promsched operator on the sandbox serves every policy with admin rights and
    would place this module's pods too, so none may run meanwhile."""
    kubeconfig = _token_kubeconfig(sandbox, chart_identity, tmp_path_factory.mktemp("chart-operator"))
    supervisor = Supervisor(sandbox.directory)
    others = [p.name for p in supervisor.recorded() if p.name.startswith("promsched") and p.alive()]
    shared_was_running = OPERATOR in others
    if shared_was_running:
        # The e2e tier's operator (normally not running here: it is per e2e module, and that tier runs
        # after this one) is stopped and restarted, as the tier's own failover test does.
        Operator(sandbox).stop()
        others.remove(OPERATOR)
    if others:
        pytest.fail(f"promsched operator(s) {others} run on this sandbox and would schedule this test's pods")
    log_file = supervisor.logs / f"{RBAC_OPERATOR}.log"
    log_start = log_file.stat().st_size if log_file.exists() else 0
    # start_scheduler passes the admin kubeconfig and its own --listen first; argparse keeps the last
    # --kubeconfig, and the Deployment's --listen (0.0.0.0:8080) is left out.
    args = [arg for arg in chart_identity.deployment_args if not arg.startswith("--listen")]
    try:
        url = start_scheduler(
            sandbox, lambda _line: None, name=RBAC_OPERATOR, extra=("--kubeconfig", str(kubeconfig), *args)
        )
        yield ChartOperator(
            url, kubeconfig, lambda: log_file.read_bytes()[log_start:].decode(errors="replace")
        )
    finally:
        supervisor.stop(RBAC_OPERATOR)
        if shared_was_running:
            Operator(sandbox).start()


def _apply(sandbox: Sandbox, document: dict[str, Any]) -> None:
    sandbox.kubectl("apply", "-f", "-", input=json.dumps(document))


def _policy(name: str, prometheus_url: str, namespace: str, secret: str) -> dict[str, Any]:
    bearer = {"bearerToken": {"namespace": namespace, "name": secret, "key": "token"}}
    return policy_manifest(name, name, prometheus_url, auth=bearer, staleAfter="1m")


def _get(sandbox: Sandbox, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(sandbox.kubectl("get", *args, "-o", "json").stdout)
    return found


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def _events(sandbox: Sandbox, namespace: str, pod: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={pod}"
    items: list[dict[str, Any]] = _get(sandbox, "events", "-n", namespace, "--field-selector", selector)[
        "items"
    ]
    return items


def test_the_operator_schedules_with_nothing_but_the_charts_permissions(
    sandbox: Sandbox, chart_identity: ChartIdentity, chart_operator: ChartOperator
) -> None:
    identity, work = chart_identity, chart_identity.work_namespace
    whoami = subprocess.run(
        [
            sandbox.binary("kubectl"),
            "--kubeconfig",
            str(chart_operator.kubeconfig),
            "auth",
            "whoami",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == identity.user

    granted, withheld = f"chart-rbac-{_suffix()}", f"chart-rbac-{_suffix()}"
    try:
        _apply(
            sandbox,
            _policy(granted, sandbox.prometheus_url, identity.secrets_namespace, identity.granted_secret),
        )
        _apply(
            sandbox,
            _policy(withheld, sandbox.prometheus_url, identity.secrets_namespace, identity.withheld_secret),
        )
        _apply(sandbox, pod_manifest("fits", work, granted, cpu="100m"))
        _apply(sandbox, pod_manifest("too-big", work, granted, cpu="1000"))

        # Bound through pods/binding, announced by an events.k8s.io/v1 event (as kube-scheduler's).
        node = eventually(
            lambda: _get(sandbox, "pod", "fits", "-n", work)["spec"].get("nodeName"),
            bool,
            timeout=SCHEDULED_WITHIN,
            what="pod fits bound",
        )
        assert node in sandbox.node_names
        scheduled = eventually(
            lambda: [e for e in _events(sandbox, work, "fits") if e["reason"] == "Scheduled"],
            bool,
            timeout=SCHEDULED_WITHIN,
            what="the Scheduled event of pod fits",
        )
        assert [e["reportingComponent"] for e in scheduled] == [granted]
        # The PodScheduled condition through pods/status, and a FailedScheduling event.
        unschedulable = eventually(
            lambda: _conditions(_get(sandbox, "pod", "too-big", "-n", work)).get("PodScheduled", {}),
            lambda c: c.get("reason") == "Unschedulable",
            timeout=SCHEDULED_WITHIN,
            what="pod too-big marked Unschedulable",
        )
        assert "Insufficient cpu" in unschedulable["message"]
        eventually(
            lambda: [e for e in _events(sandbox, work, "too-big") if e["reason"] == "FailedScheduling"],
            bool,
            timeout=SCHEDULED_WITHIN,
            what="the FailedScheduling event of pod too-big",
        )
        # Policy status through schedulingpolicies/status; Prometheus read with the granted Secret.
        status = eventually(
            lambda: _get(sandbox, "schedulingpolicy", granted).get("status") or {},
            lambda s: s.get("scheduled", 0) >= 1 and _conditions({"status": s})["Ready"]["status"] == "True",
            timeout=SCHEDULED_WITHIN,
            what=f"policy {granted} Ready with a scheduled pod",
        )
        assert _conditions({"status": status})["PrometheusReachable"]["status"] == "True"
        # A Secret not in prometheus.secretRefs stays unreadable, and the policy says so.
        reachable = eventually(
            lambda: _conditions(_get(sandbox, "schedulingpolicy", withheld)).get("PrometheusReachable", {}),
            lambda c: c.get("status") == "False",
            timeout=SCHEDULED_WITHIN,
            what=f"policy {withheld} unable to read its Secret",
        )
        assert "403" in reachable["message"]
        assert identity.withheld_secret in reachable["message"]
        # Leader election through the one Lease the chart allows.
        lease = _get(sandbox, "lease", identity.lease, "-n", identity.namespace)
        assert lease["spec"].get("holderIdentity"), lease
        # `helm test`'s check, run here against this operator, passes.
        hook = [sys.executable, *identity.hook_command[1:-1], chart_operator.url]
        answered = subprocess.run(hook, capture_output=True, text=True, timeout=90, check=False)
        assert answered.returncode == 0, answered.stderr
        assert answered.stdout.count(" answers") == 3, answered.stdout
    finally:
        sandbox.kubectl("delete", "schedulingpolicy", granted, withheld, "--ignore-not-found")

    # Nothing else was refused. Expected refusals: Kopf's optional watch of CustomResourceDefinitions
    # (it would notice CRDs created after it started), and Secrets outside prometheus.secretRefs (the
    # withheld one, or those of other tests' policies).
    refusals = [
        line
        for line in chart_operator.log().splitlines()
        if "forbidden" in line.lower()
        and "customresourcedefinitions" not in line
        and "cannot read the Prometheus credentials" not in line
    ]
    assert refusals == []


def test_an_enforce_policy_for_default_scheduler_is_held_while_kube_scheduler_runs(
    sandbox: Sandbox, chart_operator: ChartOperator
) -> None:
    """The sandbox runs no kube-scheduler: a Lease renewed as kube-scheduler renews it stands in for
    one. The chart's RBAC lets the operator read it (a 403 would hold the policy with another reason)."""
    renewed = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
        "spec": {
            "holderIdentity": "control-plane-0_1f2e",
            "leaseDurationSeconds": 3600,
            "renewTime": renewed,
        },
    }
    name = f"takeover-{_suffix()}"
    policy = {
        "apiVersion": "promsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "default-scheduler",
            "prometheus": {"url": sandbox.prometheus_url},
            "plugins": [{"name": "cpu", "weight": 1, "timeRange": "1m"}],
        },
    }
    _apply(sandbox, lease)
    try:
        _apply(sandbox, policy)
        ready = eventually(
            lambda: _conditions(_get(sandbox, "schedulingpolicy", name)).get("Ready", {}),
            lambda c: c.get("reason") == "Conflict",
            timeout=SCHEDULED_WITHIN,
            what=f"policy {name} held",
        )
        assert (
            "kube-scheduler runs (Lease kube-system/kube-scheduler is held by control-plane-0_1f2e"
            in (ready["message"])
        )
        assert ready["status"] == "False"
        conflict = _conditions(_get(sandbox, "schedulingpolicy", name))["Conflict"]
        assert (conflict["status"], conflict["reason"]) == ("True", "KubeSchedulerRunning")
    finally:
        sandbox.kubectl("delete", "schedulingpolicy", name, "--ignore-not-found")
        sandbox.kubectl("delete", "lease", "kube-scheduler", "-n", "kube-system", "--ignore-not-found")


def _can_i(sandbox: Sandbox, user: str, verb: str, target: str, *scope: str) -> bool:
    """`target`: "pods", "pods/binding" (a subresource, as RBAC writes it), "secrets NAME" (one object)."""
    resource, _, name = target.partition(" ")
    resource, _, subresource = resource.partition("/")
    command = ["auth", "can-i", verb, f"{resource}/{name}" if name else resource, *scope, f"--as={user}"]
    if subresource:
        command.append(f"--subresource={subresource}")
    result = sandbox.kubectl(*command, check=False)
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), result
    return answer == "yes"


# (verb, target as _can_i reads it, where); where: "cluster" (all namespaces), "release" (the
# ServiceAccount's), "secrets" (the allowed Secret's), "work" (the pods') or "other" (kube-system).
ALLOWED = [
    ("list", "pods", "cluster"),
    ("watch", "pods", "cluster"),
    ("get", "pods", "work"),
    ("list", "nodes", "cluster"),
    ("watch", "nodes", "cluster"),
    ("list", "schedulingpolicies.promsched.io", "cluster"),
    ("watch", "schedulingpolicies.promsched.io", "cluster"),
    ("patch", "schedulingpolicies.promsched.io/status", "cluster"),
    ("create", "pods/binding", "work"),
    ("create", "pods/binding", "other"),
    ("patch", "pods/status", "work"),
    ("create", "events.events.k8s.io", "work"),
    ("patch", "events.events.k8s.io", "work"),
    ("get", "secrets prometheus-token", "secrets"),
    ("list", "namespaces", "cluster"),
    ("watch", "persistentvolumeclaims", "cluster"),
    ("watch", "persistentvolumes", "cluster"),
    ("watch", "storageclasses.storage.k8s.io", "cluster"),
    ("watch", "csidrivers.storage.k8s.io", "cluster"),
    ("watch", "csistoragecapacities.storage.k8s.io", "cluster"),
    # VolumeBinding's PreBind: a volume's claimRef, a claim's selected node.
    ("patch", "persistentvolumes", "cluster"),
    ("patch", "persistentvolumeclaims", "work"),
    ("watch", "csinodes.storage.k8s.io", "cluster"),
    ("watch", "volumeattachments.storage.k8s.io", "cluster"),
    # Preemption and rebalancing evict through the Eviction API; preemption weighs disruption budgets.
    ("create", "pods/eviction", "work"),
    ("watch", "poddisruptionbudgets.policy", "cluster"),
    ("create", "leases.coordination.k8s.io", "release"),
    ("get", "leases.coordination.k8s.io LEASE", "release"),
    ("update", "leases.coordination.k8s.io LEASE", "release"),
    # Whether kube-scheduler runs, before a policy for default-scheduler in Enforce mode may bind.
    ("get", "leases.coordination.k8s.io kube-scheduler", "other"),
]
DENIED = [
    ("create", "pods", "work"),
    ("delete", "pods", "work"),
    ("patch", "pods", "work"),
    ("update", "pods", "work"),
    ("deletecollection", "pods", "work"),
    ("create", "pods/exec", "work"),
    ("update", "pods/status", "work"),
    ("patch", "nodes", "cluster"),
    ("update", "nodes", "cluster"),
    ("delete", "nodes", "cluster"),
    ("patch", "nodes/status", "cluster"),
    ("list", "secrets", "cluster"),
    ("list", "secrets", "secrets"),
    ("watch", "secrets", "secrets"),
    ("get", "secrets other-token", "secrets"),
    ("get", "secrets prometheus-token", "other"),
    ("get", "secrets prometheus-token", "release"),
    ("update", "secrets prometheus-token", "secrets"),
    ("create", "schedulingpolicies.promsched.io", "cluster"),
    ("patch", "schedulingpolicies.promsched.io", "cluster"),
    ("update", "schedulingpolicies.promsched.io", "cluster"),
    ("delete", "schedulingpolicies.promsched.io", "cluster"),
    ("update", "schedulingpolicies.promsched.io/status", "cluster"),
    ("create", "events", "work"),  # core/v1: the operator writes events.k8s.io/v1 only
    ("patch", "events", "work"),
    ("update", "events.events.k8s.io", "work"),
    ("delete", "events.events.k8s.io", "work"),
    ("list", "events.events.k8s.io", "work"),
    ("create", "leases.coordination.k8s.io", "other"),
    ("update", "leases.coordination.k8s.io kube-scheduler", "other"),
    ("get", "leases.coordination.k8s.io kube-controller-manager", "other"),
    ("list", "leases.coordination.k8s.io", "other"),
    ("update", "leases.coordination.k8s.io another-lease", "release"),
    ("delete", "leases.coordination.k8s.io LEASE", "release"),
    ("list", "leases.coordination.k8s.io", "release"),
    ("list", "configmaps", "cluster"),
    ("patch", "namespaces", "cluster"),
    ("update", "persistentvolumeclaims", "work"),
    ("update", "persistentvolumes", "cluster"),
    ("create", "persistentvolumes", "cluster"),
    ("delete", "persistentvolumes", "cluster"),
    ("list", "customresourcedefinitions.apiextensions.k8s.io", "cluster"),
    ("create", "serviceaccounts/token", "release"),
    ("create", "clusterrolebindings", "cluster"),
    ("create", "deployments.apps", "work"),
    ("impersonate", "serviceaccounts", "cluster"),
]


@pytest.mark.parametrize(
    ("allowed", "verb", "target", "where"),
    [(True, *row) for row in ALLOWED] + [(False, *row) for row in DENIED],
    ids=lambda value: str(value),
)
def test_the_service_account_may_do_exactly_what_scheduling_needs(
    allowed: bool, verb: str, target: str, where: str, sandbox: Sandbox, chart_identity: ChartIdentity
) -> None:
    namespaces = {
        "release": chart_identity.namespace,
        "secrets": chart_identity.secrets_namespace,
        "work": chart_identity.work_namespace,
        "other": "kube-system",
    }
    scope = ("--all-namespaces",) if where == "cluster" else ("-n", namespaces[where])
    target = target.replace("LEASE", chart_identity.lease)

    assert _can_i(sandbox, chart_identity.user, verb, target, *scope) is allowed


def test_with_namespaces_set_the_writes_are_granted_in_those_namespaces_only(
    crd: None, helm: Helm, sandbox: Sandbox, namespaces: Namespaces
) -> None:
    release_namespace, scheduled, other = (
        namespaces.make(p) for p in ("chart-ns", "chart-ns-a", "chart-ns-b")
    )
    values = {"namespaces": [scheduled]}
    documents = _documents(helm.template("scoped", release_namespace, values))
    rbac = json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": [d for d in documents if d["kind"] in RBAC_KINDS]}
    )
    user = f"system:serviceaccount:{release_namespace}:scoped-promsched"
    sandbox.kubectl("apply", "-f", "-", input=rbac)
    try:
        writes = (
            ("create", "pods/binding"),
            ("patch", "pods/status"),
            ("create", "events.events.k8s.io"),
            ("patch", "persistentvolumeclaims"),
        )
        for verb, resource in writes:
            assert _can_i(sandbox, user, verb, resource, "-n", scheduled), f"{verb} {resource} in {scheduled}"
            assert not _can_i(sandbox, user, verb, resource, "-n", other), f"{verb} {resource} in {other}"
        # Pods of every namespace are still watched: their requests occupy the nodes.
        assert _can_i(sandbox, user, "watch", "pods", "--all-namespaces")
    finally:
        sandbox.kubectl("delete", "-f", "-", "--ignore-not-found", input=rbac)
