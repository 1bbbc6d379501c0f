"""The chart's values: values.schema.json rejects unknown keys and wrong types (helm applies it on every
lint, template, install and upgrade), stays in step with values.yaml, and values.yaml documents every key."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from promsched.sandbox.builds.components import bin_dir
from support.chart_values import INSTALLABLE

CHART = Path(__file__).parents[3] / "charts" / "promsched"
HELM = bin_dir() / "helm"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES_TEXT = (CHART / "values.yaml").read_text()
SCHEMA_ERROR = "values don't meet the specifications of the schema"

needs_helm = pytest.mark.skipif(not HELM.exists(), reason="helm is built by `promsched sandbox install`")


def _template(values: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values))
    command = [str(HELM), "template", "release", str(CHART), "-f", str(file)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@needs_helm
def test_the_default_values_render_once_the_image_and_the_prometheus_hosts_are_set(tmp_path: Path) -> None:
    # Without them the chart refuses (test_chart_install_guards.py); with them, nothing else is needed.
    result = _template(INSTALLABLE, tmp_path)

    assert result.returncode == 0, result.stderr


UNKNOWN_KEYS = [
    ({"replica": 2}, "replica"),
    ({"image": {"tags": "0.1.0"}}, "tags"),
    ({"leaderElection": {"enable": True}}, "enable"),
    ({"prometheus": {"allowedHost": ["prometheus"]}}, "allowedHost"),
    ({"prometheus": {"secretRefs": [{"namespace": "m", "name": "t", "key": "token"}]}}, "key"),
    ({"probes": {"liveness": {"periodSecond": 3}}}, "periodSecond"),
    ({"networkPolicy": {"enable": True}}, "enable"),
    ({"serviceMonitor": {"intervals": "1m"}}, "intervals"),
    ({"prometheusRule": {"runbookURL": "https://example.com"}}, "runbookURL"),
    ({"admissionWarning": {"enable": False}}, "enable"),
    ({"defaultPolicy": {"enabled": True, "spc": {}}}, "spc"),
    ({"resources": {"request": {"cpu": "1"}}}, "request"),
    ({"kubeApi": {"QPS": 100}}, "QPS"),
    ({"serviceMonitor": {"namespaces": ["monitoring"]}}, "namespaces"),
    ({"prometheusRule": {"jobLabel": "promsched"}}, "jobLabel"),
    ({"grafanaDashboard": {"multiCluster": True}}, "multiCluster"),
]


@needs_helm
@pytest.mark.parametrize(("values", "key"), UNKNOWN_KEYS, ids=[key for _, key in UNKNOWN_KEYS])
def test_an_unknown_key_is_rejected(values: dict[str, Any], key: str, tmp_path: Path) -> None:
    result = _template(values, tmp_path)

    assert result.returncode != 0
    assert SCHEMA_ERROR in result.stderr, result.stderr
    assert key in result.stderr


WRONG_TYPES = [
    ({"replicas": "two"}, "/replicas"),
    ({"replicas": 0}, "/replicas"),
    ({"port": "8080"}, "/port"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"image": {"digest": "latest"}}, "/image/digest"),
    # The tag and the digest have values of their own; the chart appends them.
    ({"image": {"repository": "registry.example/promsched:0.1.0"}}, "/image/repository"),
    ({"image": {"repository": "registry.example/promsched@sha256:" + "a" * 64}}, "/image/repository"),
    ({"extraArgs": "--log-level=DEBUG"}, "/extraArgs"),
    ({"extraArgs": [2]}, "/extraArgs/0"),
    ({"env": {"HTTPS_PROXY": "http://proxy:3128"}}, "/env"),
    ({"env": [{"value": "no name"}]}, "/env/0"),
    ({"podSecurityContext": "restricted"}, "/podSecurityContext"),
    ({"securityContext": ["drop-all"]}, "/securityContext"),
    ({"serviceMonitor": {"namespace": "Monitoring"}}, "/serviceMonitor/namespace"),
    ({"prometheusRule": {"job": 1}}, "/prometheusRule/job"),
    ({"grafanaDashboard": {"multicluster": "yes"}}, "/grafanaDashboard/multicluster"),
    ({"logLevel": "TRACE"}, "/logLevel"),
    ({"resyncInterval": -1}, "/resyncInterval"),
    ({"podMaxInUnschedulablePodsDuration": "5 minutes"}, "/podMaxInUnschedulablePodsDuration"),
    ({"bindTimeoutSeconds": 0}, "/bindTimeoutSeconds"),
    ({"bindTimeoutSeconds": "10m"}, "/bindTimeoutSeconds"),
    ({"kubeApi": {"qps": 0}}, "/kubeApi/qps"),
    ({"kubeApi": {"burst": 1.5}}, "/kubeApi/burst"),
    ({"namespaces": "default"}, "/namespaces"),
    ({"namespaces": ["Not_A_Namespace"]}, "/namespaces/0"),
    ({"prometheus": {"allowedHosts": "a,b"}}, "/prometheus/allowedHosts"),
    ({"prometheus": {"allowedHosts": ["http://prometheus:9090"]}}, "/prometheus/allowedHosts/0"),
    ({"prometheus": {"allowAnyHost": "yes"}}, "/prometheus/allowAnyHost"),
    ({"prometheus": {"secretRefs": [{"namespace": "monitoring"}]}}, "/prometheus/secretRefs/0"),
    ({"serviceMonitor": {"enabled": "true"}}, "/serviceMonitor/enabled"),
    ({"serviceMonitor": {"interval": "30"}}, "/serviceMonitor/interval"),
    ({"serviceMonitor": {"relabelings": {"targetLabel": "cluster"}}}, "/serviceMonitor/relabelings"),
    ({"prometheusRule": {"enabled": "yes"}}, "/prometheusRule/enabled"),
    ({"prometheusRule": {"runbookUrl": ""}}, "/prometheusRule/runbookUrl"),
    ({"podAnnotations": {"checksum": 1}}, "/podAnnotations/checksum"),
    ({"tolerations": {"key": "x"}}, "/tolerations"),
    ({"podDisruptionBudget": {"minAvailable": "half"}}, "/podDisruptionBudget/minAvailable"),
    (
        # No scheme: the chart takes the host for the allowlist from this URL.
        {"defaultPolicy": {"enabled": True, "spec": {"prometheus": {"url": "prometheus:9090"}}}},
        "/defaultPolicy/spec/prometheus/url",
    ),
]


@needs_helm
@pytest.mark.parametrize(("values", "path"), WRONG_TYPES, ids=[path for _, path in WRONG_TYPES])
def test_a_wrong_type_or_value_is_rejected(values: dict[str, Any], path: str, tmp_path: Path) -> None:
    result = _template(values, tmp_path)

    assert result.returncode != 0
    assert SCHEMA_ERROR in result.stderr, result.stderr
    assert f"'{path}'" in result.stderr, result.stderr


def _schema_keys(schema: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of every key the schema declares, down through objects closed to other keys."""
    keys = set()
    for name, child in schema.get("properties", {}).items():
        keys.add(prefix + name)
        if child.get("additionalProperties") is False:
            keys |= _schema_keys(child, f"{prefix}{name}.")
    return keys


def _value_keys(values: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> set[str]:
    keys = set()
    for name, value in values.items():
        keys.add(prefix + name)
        child = schema.get("properties", {}).get(name, {})
        if isinstance(value, dict) and child.get("additionalProperties") is False:
            keys |= _value_keys(value, child, f"{prefix}{name}.")
    return keys


def test_values_yaml_sets_every_key_the_schema_declares() -> None:
    declared = _schema_keys(SCHEMA) - {"global"}  # helm's own, for subcharts

    assert _value_keys(yaml.safe_load(VALUES_TEXT), SCHEMA) == declared


def test_every_key_in_values_yaml_has_a_comment_above_it() -> None:
    undocumented = []
    lines = VALUES_TEXT.splitlines()
    for number, line in enumerate(lines):
        # Keys of the first two levels: the chart's settings. Deeper ones belong to a documented object
        # (resources, probe timings, the default policy's spec).
        if re.match(r"^( {2})?[A-Za-z]\w*:", line) and not lines[number - 1].lstrip().startswith("#"):
            undocumented.append(f"{number + 1}: {line.strip()}")

    assert undocumented == []
