"""The chart installs the SchedulingPolicy CRD from its own crds/ folder: crds/'s file, unchanged."""

from __future__ import annotations

from pathlib import Path

from promsched.api.crds import CRD_FILE

REPO = Path(__file__).parents[3]
CHART_CRDS = REPO / "charts" / "promsched" / "crds"


def test_the_charts_crd_is_a_byte_identical_copy_of_the_generated_one() -> None:
    generated = REPO / CRD_FILE

    assert (CHART_CRDS / generated.name).read_bytes() == generated.read_bytes(), (
        f"the chart's CRD drifted from {CRD_FILE}; run `cp {CRD_FILE} charts/promsched/crds/`"
    )


def test_the_chart_ships_no_other_crd() -> None:
    assert sorted(path.name for path in CHART_CRDS.iterdir()) == [Path(CRD_FILE).name]
