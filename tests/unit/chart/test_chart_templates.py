"""What the chart renders, from `helm template`: the operator's arguments, election-dependent objects, the
exact RBAC and the optional objects (the pods themselves: test_chart_pods.py). The API server's view of
the same manifests is tests/integration/test_chart.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rendering import CHART, FULLNAME, NAMESPACE, Manifest, container, deployment, needs_helm, render

from promsched.api.policies import GROUP, PLURAL
from promsched.cli import parse
from promsched.scheduling.intake.kinds import WATCHED

pytestmark = needs_helm


def test_pod_label_sets_are_distinct(tmp_path: Path) -> None:
    # helm would keep only one of two equal keys, and the API server only warns about it.
    objects = render(tmp_path)
    labels = deployment(objects)["spec"]["template"]["metadata"]["labels"]
    service = objects[("Service", f"{NAMESPACE}/{FULLNAME}")]

    assert service["spec"]["selector"].items() <= labels.items()
    test_pod = objects[("Pod", f"{NAMESPACE}/{FULLNAME}-test")]
    assert not service["spec"]["selector"].items() <= test_pod["metadata"]["labels"].items(), (
        "the helm test pod must not become an endpoint of the Service"
    )


def kinds(objects: Manifest) -> list[str]:
    return sorted({kind for kind, _ in objects})


# --- arguments -------------------------------------------------------------------------------


def test_the_operator_listens_on_every_address_at_the_charts_port(tmp_path: Path) -> None:
    objects = render(tmp_path, {"port": 9100, "logLevel": "DEBUG"})
    service = objects[("Service", f"{NAMESPACE}/{FULLNAME}")]

    assert {"--listen=0.0.0.0:9100", "--log-level=DEBUG"} <= set(container(objects)["args"])
    assert container(objects)["ports"] == [{"name": "http-metrics", "containerPort": 9100, "protocol": "TCP"}]
    assert service["spec"]["ports"][0]["port"] == 9100
    assert service["spec"]["ports"][0]["targetPort"] == "http-metrics"


def test_the_longest_unschedulable_wait_reaches_the_operator_as_kube_schedulers_flag(tmp_path: Path) -> None:
    args = container(render(tmp_path))["args"]
    assert "--pod-max-in-unschedulable-pods-duration=5m" in args
    assert parse(["run", *args])["pod_max_in_unschedulable_pods_duration"] == 300.0
    args = container(render(tmp_path, {"podMaxInUnschedulablePodsDuration": "90s"}))["args"]
    assert parse(["run", *args])["pod_max_in_unschedulable_pods_duration"] == 90.0


def test_the_volume_bind_timeout_reaches_the_operator_as_kube_schedulers_default(tmp_path: Path) -> None:
    args = container(render(tmp_path))["args"]
    assert "--bind-timeout-seconds=600" in args
    assert parse(["run", *args])["bind_timeout_seconds"] == 600
    args = container(render(tmp_path, {"bindTimeoutSeconds": 120}))["args"]
    assert parse(["run", *args])["bind_timeout_seconds"] == 120


def test_the_rebalance_kill_switch_reaches_the_operator(tmp_path: Path) -> None:
    args = container(render(tmp_path))["args"]
    assert parse(["run", *args])["rebalance_evictions"] is True
    args = container(render(tmp_path, {"rebalanceEvictions": False}))["args"]
    assert "--no-rebalance-evictions" in args
    assert parse(["run", *args])["rebalance_evictions"] is False


def test_the_resync_interval_reaches_the_operator(tmp_path: Path) -> None:
    assert "--resync-interval=300" in container(render(tmp_path))["args"]
    args = container(render(tmp_path, {"resyncInterval": 0}))["args"]
    assert "--resync-interval=0" in args
    assert parse(["run", *args])["resync_interval"] == 0.0


def test_the_api_rate_limit_reaches_the_operator(tmp_path: Path) -> None:
    args = container(render(tmp_path))["args"]
    assert {"--kube-api-qps=50", "--kube-api-burst=100"} <= set(args)  # kube-scheduler's defaults
    args = container(render(tmp_path, {"kubeApi": {"qps": 0.5, "burst": 2000000}}))["args"]
    parsed = parse(["run", *args])
    assert (parsed["kube_api_qps"], parsed["kube_api_burst"]) == (0.5, 2000000)


# --- replicas and leader election ----------------------------------------------------------------


def lease_role(objects: Manifest) -> dict[str, Any] | None:
    return objects.get(("Role", f"{NAMESPACE}/{FULLNAME}-leader-election"))


def test_one_replica_runs_alone_and_is_recreated_on_update(tmp_path: Path) -> None:
    objects = render(tmp_path)

    assert deployment(objects)["spec"]["strategy"] == {"type": "Recreate"}
    assert not [arg for arg in container(objects)["args"] if "lease" in arg or "leader" in arg]
    assert "PodDisruptionBudget" not in kinds(objects)
    assert lease_role(objects) is None


def test_several_replicas_elect_a_leader_and_keep_one_through_disruptions(tmp_path: Path) -> None:
    objects = render(tmp_path, {"replicas": 3})

    assert deployment(objects)["spec"]["replicas"] == 3
    assert deployment(objects)["spec"]["strategy"]["type"] == "RollingUpdate"
    args = container(objects)["args"]
    assert {"--leader-elect", f"--lease-namespace={NAMESPACE}", f"--lease-name={FULLNAME}"} <= set(args)
    budget = objects[("PodDisruptionBudget", f"{NAMESPACE}/{FULLNAME}")]
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= (
        deployment(objects)["spec"]["template"]["metadata"]["labels"].items()
    )
    role = lease_role(objects)
    assert role is not None
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [FULLNAME],
            "verbs": ["get", "update"],
        },
    ]


def test_one_replica_may_elect_to_roll_updates_without_a_budget(tmp_path: Path) -> None:
    objects = render(tmp_path, {"leaderElection": {"enabled": True, "leaseName": "mine"}})

    assert deployment(objects)["spec"]["strategy"]["type"] == "RollingUpdate"
    assert "--lease-name=mine" in container(objects)["args"]
    assert "PodDisruptionBudget" not in kinds(objects)
    role = lease_role(objects)
    assert role is not None
    assert role["rules"][1]["resourceNames"] == ["mine"]


# --- RBAC -----------------------------------------------------------------------------------------


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str, tuple[str, ...]]]:
    return {
        (group, resource, verb, tuple(rule.get("resourceNames", ())))
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


READS = {
    ("", "pods", "get", ()),
    ("", "pods", "list", ()),
    ("", "pods", "watch", ()),
    ("", "nodes", "get", ()),
    ("", "nodes", "list", ()),
    ("", "nodes", "watch", ()),
    # What placement rules read: namespace labels, claims and the volumes they are bound to.
    ("", "namespaces", "list", ()),
    ("", "namespaces", "watch", ()),
    ("", "persistentvolumeclaims", "list", ()),
    ("", "persistentvolumeclaims", "watch", ()),
    ("", "persistentvolumes", "list", ()),
    ("", "persistentvolumes", "watch", ()),
    ("storage.k8s.io", "storageclasses", "list", ()),
    ("storage.k8s.io", "storageclasses", "watch", ()),
    ("storage.k8s.io", "csinodes", "list", ()),
    ("storage.k8s.io", "csinodes", "watch", ()),
    ("storage.k8s.io", "volumeattachments", "list", ()),
    ("storage.k8s.io", "volumeattachments", "watch", ()),
    # What provisioning a claim that waits for its first pod is limited by.
    ("storage.k8s.io", "csidrivers", "list", ()),
    ("storage.k8s.io", "csidrivers", "watch", ()),
    ("storage.k8s.io", "csistoragecapacities", "list", ()),
    ("storage.k8s.io", "csistoragecapacities", "watch", ()),
    ("promsched.io", "schedulingpolicies", "get", ()),
    ("promsched.io", "schedulingpolicies", "list", ()),
    ("promsched.io", "schedulingpolicies", "watch", ()),
    ("promsched.io", "schedulingpolicies/status", "patch", ()),
    # What preemption weighs its victims by.
    ("policy", "poddisruptionbudgets", "list", ()),
    ("policy", "poddisruptionbudgets", "watch", ()),
}
WRITES = {
    ("", "pods/binding", "create", ()),
    ("", "pods/status", "patch", ()),
    ("", "persistentvolumeclaims", "patch", ()),  # VolumeBinding: a claim's selected node
    ("", "pods/eviction", "create", ()),  # preemption's victims
    ("events.k8s.io", "events", "create", ()),
    ("events.k8s.io", "events", "patch", ()),
}
# Writes on cluster-scoped objects, granted cluster-wide however namespaces are set: VolumeBinding
# pre-binds a volume to a claim.
CLUSTER_WRITES = {("", "persistentvolumes", "patch", ())}
# Whether kube-scheduler runs, for policies in Enforce mode that claim default-scheduler.
KUBE_SCHEDULER_LEASE = {("coordination.k8s.io", "leases", "get", ("kube-scheduler",))}


def kube_scheduler_lease_role(objects: Manifest) -> dict[str, Any]:
    return objects[("Role", f"kube-system/{FULLNAME}-kube-scheduler-lease")]


def test_the_cluster_role_grants_exactly_the_watches_bindings_events_and_policy_status(
    tmp_path: Path,
) -> None:
    objects = render(tmp_path)
    role = objects[("ClusterRole", f"/{FULLNAME}")]
    binding = objects[("ClusterRoleBinding", f"/{FULLNAME}")]

    assert grants(role["rules"]) == READS | WRITES | CLUSTER_WRITES
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": FULLNAME,
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]
    roles = {key for key in objects if key[0] in ("Role", "RoleBinding")}
    lease_reader = f"kube-system/{FULLNAME}-kube-scheduler-lease"
    assert roles == {("Role", lease_reader), ("RoleBinding", lease_reader)}
    assert grants(kube_scheduler_lease_role(objects)["rules"]) == KUBE_SCHEDULER_LEASE
    lease_binding = objects[("RoleBinding", lease_reader)]
    assert lease_binding["roleRef"]["name"] == f"{FULLNAME}-kube-scheduler-lease"
    assert lease_binding["subjects"] == binding["subjects"]


def test_every_kind_the_operator_follows_may_be_listed_and_watched_cluster_wide(tmp_path: Path) -> None:
    # The kinds are one table, the intake's, with the policies beside it; the chart's rules are written
    # apart, so they are checked against it, both ways.
    followed = {(kind.group, kind.plural) for kind in WATCHED} | {(GROUP, PLURAL)}
    assert {(group, resource) for group, resource, verb, _ in READS if verb == "watch"} == followed
    needed = {(group, plural, verb, ()) for group, plural in followed for verb in ("list", "watch")}
    for values in (None, {"namespaces": ["team-a"]}):
        assert needed <= grants(render(tmp_path, values)[("ClusterRole", f"/{FULLNAME}")]["rules"])


def test_namespaces_move_the_writes_into_roles_of_those_namespaces(tmp_path: Path) -> None:
    objects = render(tmp_path, {"namespaces": ["team-a", "team-b"]})

    assert grants(objects[("ClusterRole", f"/{FULLNAME}")]["rules"]) == READS | CLUSTER_WRITES
    for namespace in ("team-a", "team-b"):
        assert grants(objects[("Role", f"{namespace}/{FULLNAME}-scheduling")]["rules"]) == WRITES
        binding = objects[("RoleBinding", f"{namespace}/{FULLNAME}-scheduling")]
        assert binding["subjects"][0]["namespace"] == NAMESPACE
    assert {"--namespace=team-a", "--namespace=team-b"} <= set(container(objects)["args"])


def test_secrets_are_readable_by_name_only_and_only_those_listed(tmp_path: Path) -> None:
    values = {
        "prometheus": {
            "secretRefs": [
                {"namespace": "monitoring", "name": "prometheus-token"},
                {"namespace": "monitoring", "name": "prometheus-ca"},
                {"namespace": "observability", "name": "basic-auth"},
            ]
        },
        "defaultPolicy": {
            "enabled": True,
            "spec": {
                "prometheus": {
                    "url": "http://prometheus:9090",
                    "auth": {
                        "bearerToken": {"namespace": "monitoring", "name": "prometheus-token", "key": "t"},
                        "ca": {"namespace": "vault", "name": "ca-bundle", "key": "ca.crt"},
                    },
                }
            },
        },
    }

    objects = render(tmp_path, values)

    readable = {
        key[1].split("/")[0]: grants(role["rules"])
        for key, role in objects.items()
        if key[0] == "Role" and key[1].endswith("-secrets")
    }
    assert readable == {
        "monitoring": {
            ("", "secrets", "get", ("prometheus-ca", "prometheus-token")),
        },
        "observability": {("", "secrets", "get", ("basic-auth",))},
        "vault": {("", "secrets", "get", ("ca-bundle",))},
    }
    assert not [g for g in grants(objects[("ClusterRole", f"/{FULLNAME}")]["rules"]) if g[1] == "secrets"]


def test_rbac_and_service_account_can_be_left_to_the_cluster_admin(tmp_path: Path) -> None:
    objects = render(
        tmp_path, {"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "given"}}
    )

    assert not {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} & set(
        kinds(objects)
    )
    # The admission warning needs no RBAC of the operator's: it stays.
    assert "ValidatingAdmissionPolicy" in kinds(objects)
    assert deployment(objects)["spec"]["template"]["spec"]["serviceAccountName"] == "given"


def test_only_the_scheduler_pods_mount_the_service_accounts_token(tmp_path: Path) -> None:
    objects = render(tmp_path)

    assert objects[("ServiceAccount", f"{NAMESPACE}/{FULLNAME}")]["automountServiceAccountToken"] is False
    assert deployment(objects)["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    assert objects[("Pod", f"{NAMESPACE}/{FULLNAME}-test")]["spec"]["automountServiceAccountToken"] is False


# --- optional objects ----------------------------------------------------------------------------


def test_optional_objects_are_off_by_default(tmp_path: Path) -> None:
    assert kinds(render(tmp_path)) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Pod",  # the helm test hook
        "Role",  # reads kube-scheduler's Lease
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",  # warns on a policy that would race kube-scheduler
        "ValidatingAdmissionPolicyBinding",
    ]


def test_the_service_monitor_scrapes_the_metrics_port_of_this_releases_service(tmp_path: Path) -> None:
    values = {"serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"release": "kps"}}}
    objects = render(tmp_path, values)
    monitor = objects[("ServiceMonitor", f"{NAMESPACE}/{FULLNAME}")]
    service = objects[("Service", f"{NAMESPACE}/{FULLNAME}")]

    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["endpoints"] == [
        {"port": "http-metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}
    ]


def test_the_service_monitor_takes_relabelings(tmp_path: Path) -> None:
    relabelings = [{"targetLabel": "cluster", "replacement": "prod-eu"}]
    metric_relabelings = [{"sourceLabels": ["__name__"], "regex": ".*_bucket", "action": "drop"}]
    values = {
        "serviceMonitor": {
            "enabled": True,
            "relabelings": relabelings,
            "metricRelabelings": metric_relabelings,
        }
    }
    [endpoint] = render(tmp_path, values)[("ServiceMonitor", f"{NAMESPACE}/{FULLNAME}")]["spec"]["endpoints"]

    assert endpoint["relabelings"] == relabelings
    assert endpoint["metricRelabelings"] == metric_relabelings


def test_the_service_monitor_may_live_in_prometheus_namespace_and_still_scrape_the_release(
    tmp_path: Path,
) -> None:
    values = {"serviceMonitor": {"enabled": True, "namespace": "monitoring"}}

    objects = render(tmp_path, values)

    monitor = objects[("ServiceMonitor", f"monitoring/{FULLNAME}")]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert ("ServiceMonitor", f"{NAMESPACE}/{FULLNAME}") not in objects


def test_the_admission_warning_is_for_enforce_policies_on_default_scheduler(tmp_path: Path) -> None:
    objects = render(tmp_path)
    name = f"{FULLNAME}-default-scheduler"
    policy = objects[("ValidatingAdmissionPolicy", f"/{name}")]["spec"]
    binding = objects[("ValidatingAdmissionPolicyBinding", f"/{name}")]["spec"]

    assert binding == {"policyName": name, "validationActions": ["Warn"]}
    assert policy["matchConstraints"]["resourceRules"][0]["resources"] == ["schedulingpolicies"]
    [validation] = policy["validations"]
    assert "default-scheduler" in validation["expression"]
    assert "Use mode: Shadow" in validation["message"]
    assert "ValidatingAdmissionPolicy" not in kinds(
        render(tmp_path, {"admissionWarning": {"enabled": False}})
    )
    # Kubernetes 1.29 serves no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy.
    assert "ValidatingAdmissionPolicy" not in kinds(render(tmp_path, {}, "--kube-version", "1.29.3"))


def test_the_network_policy_opens_only_the_metrics_port_and_admits_the_test_pod(tmp_path: Path) -> None:
    monitoring = {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}
    api_server = {"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"port": 443, "protocol": "TCP"}]}
    values = {
        "networkPolicy": {
            "enabled": True,
            "metricsFrom": [monitoring],
            "restrictEgress": True,
            "egress": [api_server],
        }
    }
    objects = render(tmp_path, values)
    policy = objects[("NetworkPolicy", f"{NAMESPACE}/{FULLNAME}")]["spec"]
    test_pod = objects[("Pod", f"{NAMESPACE}/{FULLNAME}-test")]

    assert policy["policyTypes"] == ["Ingress", "Egress"]
    [ingress] = policy["ingress"]
    assert ingress["ports"] == [{"port": 8080, "protocol": "TCP"}]
    assert ingress["from"][0] == monitoring
    assert ingress["from"][1]["podSelector"]["matchLabels"].items() <= test_pod["metadata"]["labels"].items()
    assert {53} == {port["port"] for port in policy["egress"][0]["ports"]}
    assert policy["egress"][1] == api_server


def test_the_default_policy_is_rendered_from_values(tmp_path: Path) -> None:
    spec = {
        "schedulerName": "load-aware",
        "prometheus": {"url": "http://prometheus:9090"},
        "plugins": [{"name": "cpu", "weight": 1, "timeRange": "5m"}],
    }
    objects = render(tmp_path, {"defaultPolicy": {"enabled": True, "name": "cluster-default", "spec": spec}})
    policy = objects[("SchedulingPolicy", "/cluster-default")]

    assert policy["apiVersion"] == "promsched.io/v1alpha1"
    assert policy["spec"]["schedulerName"] == "load-aware"
    assert policy["spec"]["plugins"] == spec["plugins"]  # lists replace the chart's
    # Maps merge over the chart's default spec: its keys stay unless set to null.
    assert policy["spec"]["prometheus"] == {"url": "http://prometheus:9090", "timeout": "5s"}


def test_the_helm_test_asks_the_operator_through_its_service(tmp_path: Path) -> None:
    objects = render(tmp_path, {"port": 9100})
    test_pod = objects[("Pod", f"{NAMESPACE}/{FULLNAME}-test")]

    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert test_pod["spec"]["restartPolicy"] == "Never"
    [check] = test_pod["spec"]["containers"]
    assert check["image"] == container(objects)["image"]
    assert check["command"][:2] == ["python", "-c"]
    assert check["command"][-1] == f"http://{FULLNAME}.{NAMESPACE}.svc:9100"
    for path in ("/healthz", "/readyz", "/metrics"):
        assert f'"{path}"' in check["command"][2]


def test_the_grafana_dashboard_ships_the_charts_json(tmp_path: Path) -> None:
    objects = render(tmp_path, {"grafanaDashboard": {"enabled": True}})
    dashboard = objects[("ConfigMap", f"{NAMESPACE}/{FULLNAME}-dashboard")]

    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["data"]["promsched.json"] == (
        CHART / "dashboards" / "promsched.json"
    ).read_text().rstrip("\n")
