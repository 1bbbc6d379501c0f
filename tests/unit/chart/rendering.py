"""The chart as `helm template` renders it, for the chart's unit tests (skipped without helm)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from promsched.sandbox.builds.components import bin_dir
from support.chart_values import installable

CHART = Path(__file__).parents[3] / "charts" / "promsched"
HELM = bin_dir() / "helm"
RELEASE, NAMESPACE, FULLNAME = "sched", "promsched-system", "sched-promsched"

needs_helm = pytest.mark.skipif(not HELM.exists(), reason="helm is built by `promsched sandbox install`")

Manifest = dict[tuple[str, str], dict[str, Any]]  # (kind, namespace/name) -> object
# Renders a copy of NOTES.txt, at the chart's root where .Files reaches it, with the chart's context.
NOTES_SHIM = """apiVersion: v1
kind: ConfigMap
metadata: {name: notes}
data:
  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}
"""


def helm_template(
    tmp_path: Path, values: dict[str, Any], *options: str, chart: Path = CHART
) -> subprocess.CompletedProcess[str]:
    """`helm template` with exactly these values over the chart's defaults."""
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values))
    command = [str(HELM), "template", RELEASE, str(chart), "-n", NAMESPACE, "-f", str(file), *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def render(tmp_path: Path, values: dict[str, Any] | None = None, *options: str) -> Manifest:
    """The objects of an install: `values` over the least a user must set (support.chart_values)."""
    result = helm_template(tmp_path, installable(values), *options)
    assert result.returncode == 0, result.stderr
    objects: Manifest = {}
    for document in yaml.safe_load_all(result.stdout):
        if document:
            metadata = document["metadata"]
            key = (document["kind"], f"{metadata.get('namespace', '')}/{metadata['name']}")
            assert key not in objects, f"{key} rendered twice"
            objects[key] = document
    return objects


def deployment(objects: Manifest) -> dict[str, Any]:
    return objects[("Deployment", f"{NAMESPACE}/{FULLNAME}")]


def container(objects: Manifest) -> dict[str, Any]:
    """The operator's container."""
    found: dict[str, Any] = deployment(objects)["spec"]["template"]["spec"]["containers"][0]
    return found


def refusal(tmp_path: Path, values: dict[str, Any]) -> str:
    """Why the chart refuses to render with exactly these values (helm's error)."""
    result = helm_template(tmp_path, values)
    assert result.returncode != 0, f"rendered:\n{result.stdout}"
    return result.stderr


def render_notes(tmp_path: Path, values: dict[str, Any] | None = None) -> str:
    """NOTES.txt as `helm install` prints it (which needs a cluster): a copy of the chart renders the same
    text, with the same helpers and values, into a ConfigMap."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart, dirs_exist_ok=True)
    shutil.copy(CHART / "templates" / "NOTES.txt", chart / "notes.txt")
    (chart / "templates" / "notes.yaml").write_text(NOTES_SHIM)
    result = helm_template(tmp_path, installable(values), "--show-only", "templates/notes.yaml", chart=chart)
    assert result.returncode == 0, result.stderr
    notes: str = yaml.safe_load(result.stdout)["data"]["notes"]
    return notes
