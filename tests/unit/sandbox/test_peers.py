"""Trimaran's configuration as the sandbox writes it, and how its log is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from promsched.sandbox.peers import (
    Trimaran,
    TrimaranSettings,
    scheduler_configuration,
)

KUBECONFIG = Path("/sandbox/kubeconfig")
PROMETHEUS = "http://127.0.0.1:9090"


def _profile(config: dict[str, Any]) -> dict[str, Any]:
    (profile,) = config["profiles"]
    assert isinstance(profile, dict)
    return profile


def test_target_load_packing_follows_the_sample_configuration() -> None:
    config: dict[str, Any] = scheduler_configuration("TargetLoadPacking", KUBECONFIG, PROMETHEUS)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["clientConnection"] == {"kubeconfig": str(KUBECONFIG), "qps": 50.0, "burst": 100}
    profile = _profile(config)
    assert profile["schedulerName"] == "trimaran-tlp"
    assert profile["plugins"]["score"] == {
        "disabled": [{"name": "NodeResourcesBalancedAllocation"}, {"name": "NodeResourcesFit"}],
        "enabled": [{"name": "TargetLoadPacking"}],
    }
    assert profile["pluginConfig"] == [
        {
            "name": "TargetLoadPacking",
            "args": {
                "targetUtilization": 40,
                "defaultRequestsMultiplier": "1",
                "metricProvider": {"type": "Prometheus", "address": PROMETHEUS},
            },
        }
    ]


def test_load_variation_risk_balancing_takes_its_own_arguments_and_name() -> None:
    settings = TrimaranSettings(safe_variance_margin=2.0, safe_variance_sensitivity=0.5, qps=200, burst=400)
    config: dict[str, Any] = scheduler_configuration(
        "LoadVariationRiskBalancing", KUBECONFIG, PROMETHEUS, "lvrb-2", settings
    )
    assert config["clientConnection"]["qps"] == 200
    profile = _profile(config)
    assert profile["schedulerName"] == "lvrb-2"
    assert profile["plugins"]["score"]["enabled"] == [{"name": "LoadVariationRiskBalancing"}]
    assert profile["pluginConfig"] == [
        {
            "name": "LoadVariationRiskBalancing",
            "args": {
                "safeVarianceMargin": 2.0,
                "safeVarianceSensitivity": 0.5,
                "metricProvider": {"type": "Prometheus", "address": PROMETHEUS},
            },
        }
    ]


def test_an_unknown_plugin_is_named_with_the_choices() -> None:
    with pytest.raises(
        ValueError, match="'LowRiskOverCommitment' is not a Trimaran plugin; use one of Target"
    ):
        scheduler_configuration("LowRiskOverCommitment", KUBECONFIG, PROMETHEUS)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"target_utilization": 0}, "target_utilization: 0 is not a percentage"),
        ({"target_utilization": 100}, "target_utilization: 100 is not a percentage"),
        ({"requests_multiplier": "x1.5"}, "requests_multiplier: 'x1.5' is not a non-negative number"),
        ({"requests_multiplier": "-1"}, "requests_multiplier: '-1' is not a non-negative number"),
    ],
)
def test_bad_settings_name_the_field(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrimaranSettings(**changes)


# Lines as kube-scheduler's klog text format and load-watcher's logrus write them.
LOG = """\
I1201 05:40:00.100000   42 flags.go:64] FLAG: --vmodule="targetloadpacking=6"
time="2026-12-01T05:40:00Z" level=info msg="Started watching metrics"
I1201 05:40:01.000000   42 targetloadpacking.go:150] "Calculating CPU utilization and capacity" \
logger="TargetLoadPacking" ExtensionPoint="Score" nodeName="node-0" cpuUtilMillis=1400 cpuCapMillis=4000
I1201 05:40:01.0   42 targetloadpacking.go:180] "Penalised score for host" nodeName="node-9" score=3
I1201 05:40:01.000001   42 resourcestats.go:71] "Resource usage statistics for node" ExtensionPoint="Score" \
node="node-1" resource="cpu" capacity=3900 required=200 usedAvg=195 usedStdev=0
I1201 05:40:01.000001   42 resourcestats.go:71] "Resource usage statistics for node" ExtensionPoint="Score" \
node="node-5" resource="memory" capacity=3900 required=200 usedAvg=195 usedStdev=0
I1201 05:40:01.000002   42 targetloadpacking.go:115] "Failed to get metrics for node; using minimum score" \
nodeName="node-2"
time="2026-12-01T05:40:30Z" level=error msg="error querying Prometheus for query x: refused"
"""


def test_the_log_tells_nodes_scored_from_metrics_and_metrics_failures(tmp_path: Path) -> None:
    log = tmp_path / "trimaran-tlp.log"
    log.write_text(LOG)
    trimaran = Trimaran(tmp_path, "TargetLoadPacking", "trimaran-tlp", "trimaran-tlp", 1, tmp_path, log)
    assert trimaran.nodes_scored_from_metrics() == {"node-0", "node-1"}
    failures = trimaran.metrics_failures()
    assert [line[:30] for line in failures] == [
        "I1201 05:40:01.000002   42 tar",
        'time="2026-12-01T05:40:30Z" le',
    ]
