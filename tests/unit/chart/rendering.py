"""The chart as `helm template` renders it, for the chart's unit tests (skipped without helm)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from promsched.sandbox.components import bin_dir

CHART = Path(__file__).parents[3] / "charts" / "promsched"
HELM = bin_dir() / "helm"
RELEASE, NAMESPACE, FULLNAME = "sched", "promsched-system", "sched-promsched"

needs_helm = pytest.mark.skipif(not HELM.exists(), reason="helm is built by `promsched sandbox install`")

Manifest = dict[tuple[str, str], dict[str, Any]]  # (kind, namespace/name) -> object


def render(tmp_path: Path, values: dict[str, Any] | None = None, *options: str) -> Manifest:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values or {}))
    command = [str(HELM), "template", RELEASE, str(CHART), "-n", NAMESPACE, "-f", str(file), *options]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    objects: Manifest = {}
    for document in yaml.safe_load_all(result.stdout):
        if document:
            metadata = document["metadata"]
            key = (document["kind"], f"{metadata.get('namespace', '')}/{metadata['name']}")
            assert key not in objects, f"{key} rendered twice"
            objects[key] = document
    return objects
