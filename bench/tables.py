"""Markdown tables as the benches' reports write them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A table whose first column is text, left-aligned, and the others figures, right-aligned."""
    return [row(header), "| --- |" + " ---: |" * (len(header) - 1), *(row(cells) for cells in rows)]


def value(run: Mapping[str, Any] | None, path: tuple[str, ...]) -> float:
    """The figure at `path` in a run's results (NaN when absent or not a number)."""
    found: Any = run
    for part in path:
        found = found.get(part) if isinstance(found, dict) else None
    return float(found) if isinstance(found, int | float) else math.nan


def ratio(mine: float, theirs: float) -> float:
    return mine / theirs if theirs and math.isfinite(mine) and math.isfinite(theirs) else math.nan


def shown(template: str, number: float) -> str:
    """`number` in `template`, or "-" when it was not measured."""
    return template.format(number) if math.isfinite(number) else "-"
