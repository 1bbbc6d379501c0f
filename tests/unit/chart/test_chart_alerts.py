"""The chart's PrometheusRule: valid for `promtool check rules`, on series the operator exports, and each
alert firing (and only then) on series shaped as the ServiceMonitor scrapes them, by `promtool test rules`.
Skipped without helm (built by the sandbox) or promtool (Debian's `prometheus` package)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from rendering import FULLNAME, NAMESPACE, needs_helm, refusal, render

from support.chart_values import installable
from support.metric_names import exported_series, promsched_series_in

pytestmark = [
    needs_helm,
    pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed"),
]

# The page with each alert's runbook paragraph: the chart's default runbookUrl, relative to the repository.
RUNBOOKS = "docs/operations.md"
ALERTS = [
    "PromschedPolicyNotReady",
    "PromschedNoLeader",
    "PromschedPodsPending",
    "PromschedSnapshotStale",
    "PromschedBindErrors",
]
LEADER, STANDBY = "10.0.0.5:8080", "10.0.0.6:8080"


def rules(tmp_path: Path, **rule_values: str) -> list[dict[str, Any]]:
    values = {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True, "labels": {"release": "kps"}, **rule_values},
    }
    objects = render(tmp_path, values)
    rule = objects[("PrometheusRule", f"{NAMESPACE}/{FULLNAME}")]
    assert rule["metadata"]["labels"]["release"] == "kps"
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60, check=False)


def test_the_rules_pass_promtool_check_rules(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rules(tmp_path)}))

    result = promtool("check", "rules", str(path))

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


def test_the_rules_are_off_by_default(tmp_path: Path) -> None:
    assert not [key for key in render(tmp_path) if key[0] == "PrometheusRule"]


def test_the_rules_are_refused_when_nothing_scrapes_the_operator(tmp_path: Path) -> None:
    # PromschedNoLeader is an absent() alert: without a scrape it would fire forever.
    message = refusal(tmp_path, installable({"prometheusRule": {"enabled": True}}))

    assert "serviceMonitor.enabled" in message
    assert "prometheusRule.job" in message


def test_the_rules_select_the_job_the_service_monitor_gives(tmp_path: Path) -> None:
    # prometheus-operator gives a ServiceMonitor's targets job=<the Service's name> (no jobLabel set).
    objects = render(tmp_path, {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}})
    monitor = objects[("ServiceMonitor", f"{NAMESPACE}/{FULLNAME}")]
    [service] = [
        obj
        for (kind, _), obj in objects.items()
        if kind == "Service"
        and monitor["spec"]["selector"]["matchLabels"].items() <= obj["metadata"]["labels"].items()
    ]
    assert "jobLabel" not in monitor["spec"]
    [group] = objects[("PrometheusRule", f"{NAMESPACE}/{FULLNAME}")]["spec"]["groups"]

    for rule in group["rules"]:
        assert f'job="{service["metadata"]["name"]}", namespace="{NAMESPACE}"' in rule["expr"]


@pytest.mark.parametrize("service_monitor", [False, True])
def test_the_rules_select_the_job_they_are_given(tmp_path: Path, service_monitor: bool) -> None:
    # Something else scrapes the operator (a pod-annotation scrape job, say), or a relabeling sets job.
    values = {
        "serviceMonitor": {"enabled": service_monitor},
        "prometheusRule": {"enabled": True, "job": "kubernetes-pods"},
    }
    [group] = render(tmp_path, values)[("PrometheusRule", f"{NAMESPACE}/{FULLNAME}")]["spec"]["groups"]

    for rule in group["rules"]:
        assert f'job="kubernetes-pods", namespace="{NAMESPACE}"' in rule["expr"]
        assert FULLNAME not in rule["expr"]


def test_every_alert_reads_exported_series_and_links_its_runbook_paragraph(tmp_path: Path) -> None:
    [group] = rules(tmp_path)
    page = Path(__file__).parents[3] / RUNBOOKS
    headings = {line.removeprefix("#### ") for line in page.read_text().splitlines()}

    assert [rule["alert"] for rule in group["rules"]] == ALERTS
    assert promsched_series_in([rule["expr"] for rule in group["rules"]]) - exported_series() == set()
    for rule in group["rules"]:
        assert rule["alert"] in headings, f"{RUNBOOKS} has no runbook paragraph for {rule['alert']}"
        assert rule["annotations"]["runbook_url"] == f"{RUNBOOKS}#{rule['alert'].lower()}"


def series(metric: str, instance: str, values: str, **labels: str) -> dict[str, str]:
    target = {"job": FULLNAME, "namespace": NAMESPACE, "instance": instance, **labels}
    inner = ",".join(f'{name}="{value}"' for name, value in target.items())
    return {"series": f"{metric}{{{inner}}}", "values": values}


# Two replicas: the leader and a standby whose series must not raise alerts of their own.
LEADERSHIP = [
    series("promsched_leader", LEADER, "1x30"),
    series("promsched_leader", STANDBY, "0x30"),
]

# (alert, input series, minute of evaluation, labels of the alerts expected to fire then)
CASES = [
    pytest.param(
        "PromschedPolicyNotReady",
        [
            *LEADERSHIP,
            series("promsched_policy_ready", LEADER, "0x30", policy="p"),
            series("promsched_policy_ready", LEADER, "1x30", policy="q"),
            series("promsched_policy_ready", STANDBY, "0x30", policy="q"),
        ],
        {4: [], 6: [{"policy": "p", "severity": "warning"}]},
        id="not-ready",
    ),
    pytest.param(
        "PromschedNoLeader",
        [series("promsched_leader", LEADER, "1x5 0x25"), series("promsched_leader", STANDBY, "0x30")],
        {6: [], 8: [{"severity": "critical"}]},
        id="no-leader",
    ),
    pytest.param(
        "PromschedNoLeader",
        [],
        {3: [{"job": FULLNAME, "namespace": NAMESPACE, "severity": "critical"}]},
        id="no-operator-scraped",
    ),
    pytest.param(
        "PromschedPodsPending",
        [
            *LEADERSHIP,
            series("promsched_pending_pods", LEADER, "3x30", queue="unschedulable"),
            series("promsched_pending_pods", LEADER, "0x30", queue="active"),
        ],
        {9: [], 11: [{"severity": "warning"}]},
        id="pending",
    ),
    pytest.param(
        "PromschedPodsPending",
        [*LEADERSHIP, series("promsched_pending_pods", LEADER, "3 0 3 0 3 0 3 0 3 0 3 0 3", queue="active")],
        {12: []},
        id="a-queue-that-empties",
    ),
    pytest.param(
        "PromschedSnapshotStale",
        [
            *LEADERSHIP,
            series("promsched_policy_snapshot_age_seconds", LEADER, "60x30", policy="p"),
            series("promsched_policy_refresh_interval_seconds", LEADER, "15x30", policy="p"),
            series("promsched_policy_snapshot_age_seconds", LEADER, "40x30", policy="q"),
            series("promsched_policy_refresh_interval_seconds", LEADER, "15x30", policy="q"),
            series("promsched_policy_snapshot_age_seconds", STANDBY, "60x30", policy="p"),
            series("promsched_policy_refresh_interval_seconds", STANDBY, "15x30", policy="p"),
        ],
        {
            3: [
                {
                    "job": FULLNAME,
                    "namespace": NAMESPACE,
                    "instance": LEADER,
                    "policy": "p",
                    "severity": "warning",
                }
            ]
        },
        id="stale",
    ),
    pytest.param(
        "PromschedBindErrors",
        [
            *LEADERSHIP,
            series("promsched_schedule_attempts_total", LEADER, "0+1x30", policy="p", result="error"),
            series("promsched_schedule_attempts_total", LEADER, "0+9x30", policy="q", result="scheduled"),
        ],
        {4: [], 11: [{"policy": "p", "severity": "warning"}]},
        id="bind-errors",
    ),
]


def _annotations(rule: dict[str, Any], labels: dict[str, str], value: str) -> dict[str, str]:
    """The rule's annotations as Prometheus expands them for one alert (the templates used here)."""
    expanded = {}
    for name, text in rule["annotations"].items():
        text = text.replace("{{ $labels.policy }}", labels.get("policy", ""))
        expanded[name] = text.replace("{{ $value | humanizeDuration }}", value)
    return expanded


@pytest.mark.parametrize(("alert", "input_series", "expected"), CASES)
def test_each_alert_fires_when_and_only_when_it_should(
    tmp_path: Path, alert: str, input_series: list[dict[str, str]], expected: dict[int, list[dict[str, str]]]
) -> None:
    groups = rules(tmp_path)
    [rule] = [rule for rule in groups[0]["rules"] if rule["alert"] == alert]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    test_file = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": input_series,
                "alert_rule_test": [
                    {
                        "eval_time": f"{minute}m",
                        "alertname": alert,
                        "exp_alerts": [
                            {"exp_labels": labels, "exp_annotations": _annotations(rule, labels, "1m 0s")}
                            for labels in firing
                        ],
                    }
                    for minute, firing in expected.items()
                ],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test_file))

    result = promtool("test", "rules", str(tmp_path / "test.yaml"))

    assert result.returncode == 0, result.stdout + result.stderr
