"""Markdown tables as the benches' reports write them."""

from __future__ import annotations

from collections.abc import Sequence


def row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"
