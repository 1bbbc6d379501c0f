"""Chart.yaml names where the chart comes from (home, sources, icon), and `helm lint --strict` has nothing
to say about the chart, with its defaults or with every option on."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from rendering import CHART, HELM, needs_helm

from support.chart_values import installable

METADATA = yaml.safe_load((CHART / "Chart.yaml").read_text())


def test_the_chart_names_its_home_sources_and_icon() -> None:
    assert METADATA["home"].startswith("https://")
    assert METADATA["home"] in METADATA["sources"]
    assert METADATA["icon"].startswith("https://")


def test_the_icon_is_the_charts_own_file_as_its_repository_serves_it() -> None:
    path = METADATA["icon"].split("/main/", 1)[1]

    assert (CHART.parents[1] / path).is_file()
    assert (CHART.parents[1] / path).parent == CHART


EVERY_OPTION = installable(
    {
        "replicas": 2,
        "extraArgs": ["--watch-inactivity-timeout=120"],
        "env": [{"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"}],
        "serviceMonitor": {"enabled": True, "namespace": "monitoring", "labels": {"release": "kps"}},
        "prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
        "grafanaDashboard": {"enabled": True, "multicluster": True},
        "networkPolicy": {"enabled": True, "restrictEgress": True},
        "defaultPolicy": {"enabled": True},
    }
)


@needs_helm
@pytest.mark.parametrize("values", [{}, EVERY_OPTION], ids=["defaults", "every-option"])
def test_helm_lint_strict_is_silent(values: dict[str, Any], tmp_path: Path) -> None:
    # With the defaults, lint renders the templates without refusing (helm's lint mode only logs a
    # `required` or `fail`), so `helm package` and `make dist` can lint the chart as it ships.
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values))

    result = subprocess.run(
        [str(HELM), "lint", "--strict", str(CHART), "-f", str(file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout
    assert [line for line in result.stdout.splitlines() if line.startswith("[")] == []
