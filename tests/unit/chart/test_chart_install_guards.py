"""The chart renders a working install or none: values that cannot work are refused at template time with a
message naming the value to set, and NOTES.txt gives commands that work for a packaged chart."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from rendering import CHART, HELM, container, needs_helm, refusal, render, render_notes

from promsched.api.crds import CRD_NAME
from support.chart_values import INSTALLABLE

APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
REPOSITORY = INSTALLABLE["image"]["repository"]

pytestmark = needs_helm


# --- the image --------------------------------------------------------------------------------------


def test_the_default_values_are_refused_naming_the_image_repository(tmp_path: Path) -> None:
    # No registry serves a default repository: an install would never pull its image.
    message = refusal(tmp_path, {})

    assert "set image.repository" in message
    assert "make image" in message


def test_the_image_tag_defaults_to_the_app_version(tmp_path: Path) -> None:
    assert container(render(tmp_path))["image"] == f"{REPOSITORY}:{APP_VERSION}"
    tagged = {"image": {"repository": "registry.example/promsched", "tag": "1.2.3"}}
    assert container(render(tmp_path, tagged))["image"] == "registry.example/promsched:1.2.3"
    digest = "sha256:" + "a" * 64
    assert container(render(tmp_path, {"image": {"digest": digest}}))["image"].endswith(f"@{digest}")


def test_a_registry_with_a_port_is_a_repository(tmp_path: Path) -> None:
    image = container(render(tmp_path, {"image": {"repository": "127.0.0.1:5000/promsched"}}))["image"]

    assert image == f"127.0.0.1:5000/promsched:{APP_VERSION}"


# --- the Prometheus allowlist -----------------------------------------------------------------------


def test_an_allowlist_that_allows_nothing_is_refused_naming_the_allowed_hosts(tmp_path: Path) -> None:
    # The operator would hold every policy InvalidPolicy.
    message = refusal(tmp_path, {"image": {"repository": REPOSITORY}})

    assert "set prometheus.allowedHosts" in message
    assert "prometheus-operated.monitoring.svc" in message  # kube-prometheus-stack's, as an example
    assert "prometheus.allowAnyHost" in message


def test_the_allowlist_reaches_the_operator(tmp_path: Path) -> None:
    values = {"prometheus": {"allowedHosts": ["prometheus-operated.monitoring.svc", "10.0.0.9"]}}

    args = container(render(tmp_path, values))["args"]

    assert "--allowed-prometheus-hosts=prometheus-operated.monitoring.svc,10.0.0.9" in args


def test_the_default_policys_host_joins_the_allowlist(tmp_path: Path) -> None:
    values = {
        "prometheus": {"allowedHosts": ["other.example"]},
        "defaultPolicy": {"enabled": True, "spec": {"prometheus": {"url": "https://prom.example:9443/x"}}},
    }

    args = container(render(tmp_path, values))["args"]

    assert "--allowed-prometheus-hosts=other.example,prom.example" in args


def test_allow_any_host_leaves_the_flag_out(tmp_path: Path) -> None:
    args = container(render(tmp_path, {"prometheus": {"allowAnyHost": True}}))["args"]

    assert not [arg for arg in args if arg.startswith("--allowed-prometheus-hosts")]


def test_an_empty_allowlist_renders_with_a_default_policy_or_any_host_allowed(tmp_path: Path) -> None:
    empty: dict[str, Any] = {"prometheus": {"allowedHosts": []}}
    with_policy = {**empty, "defaultPolicy": {"enabled": True}}
    any_host = {"prometheus": {"allowedHosts": [], "allowAnyHost": True}}

    assert (
        "--allowed-prometheus-hosts=prometheus-operated.monitoring.svc"
        in (container(render(tmp_path, with_policy))["args"])
    )
    assert not [arg for arg in container(render(tmp_path, any_host))["args"] if "allowed-prometheus" in arg]


# --- NOTES.txt ----------------------------------------------------------------------------------------


def test_the_notes_name_no_path_of_a_git_checkout(tmp_path: Path) -> None:
    notes = render_notes(tmp_path)

    assert "charts/promsched" not in notes
    assert f"kubectl get crd {CRD_NAME}" in notes
    assert "helm show crds CHART | kubectl apply --server-side --force-conflicts -f -" in notes


def test_helm_show_crds_gives_the_crd_of_a_packaged_chart(tmp_path: Path) -> None:
    # What the notes' upgrade command reads: the CRD of the chart a user upgrades to, here as a .tgz.
    packaged = subprocess.run(
        [str(HELM), "package", str(CHART), "-d", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    archive = packaged.stdout.strip().rsplit(": ", 1)[1]

    shown = subprocess.run(
        [str(HELM), "show", "crds", archive], capture_output=True, text=True, timeout=60, check=True
    )

    [crd] = [doc for doc in yaml.safe_load_all(shown.stdout) if doc]
    assert crd["metadata"]["name"] == CRD_NAME


def test_the_notes_list_the_allowed_hosts(tmp_path: Path) -> None:
    assert "may use: prometheus-operated.monitoring.svc\n" in render_notes(tmp_path)
    notes = render_notes(tmp_path, {"prometheus": {"allowAnyHost": True}})
    assert "may use: ANY (prometheus.allowAnyHost=true)" in notes


def test_the_notes_say_when_kube_prometheus_stack_would_ignore_the_monitor_or_the_rules(
    tmp_path: Path,
) -> None:
    unlabelled = {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}
    labelled = {
        "serviceMonitor": {"enabled": True, "labels": {"release": "kps"}},
        "prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
    }

    notes = render_notes(tmp_path, unlabelled)
    assert "(set serviceMonitor.labels)" in notes
    assert "(set prometheusRule.labels)" in notes
    notes = render_notes(tmp_path, labelled)
    assert "serviceMonitor.labels" not in notes
    assert "prometheusRule.labels" not in notes
