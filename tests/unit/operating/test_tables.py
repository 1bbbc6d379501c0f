"""Tables drawn by rich: plain text in a pipe or with NO_COLOR, colour and the terminal's width on one."""

from __future__ import annotations

import io
import re

import pytest

from promsched.operating.tables import PLAIN, Screen, screen_of, table

ROWS = [["NODE", "cpu (w3)", "TOTAL"], ["node-10 *", "27.8 → 72.2", "77.5"], ["node-1", "-", "71.4"]]


def test_plain_tables_are_columns_two_spaces_apart_without_trailing_blanks() -> None:
    assert (
        table(ROWS)
        == "NODE       cpu (w3)     TOTAL\nnode-10 *  27.8 → 72.2  77.5\nnode-1     -            71.4"
    )
    assert table([["12", "Insufficient cpu"], ["1", "x"]], header=False, right=(0,), indent=2) == (
        "  12  Insufficient cpu\n   1  x"
    )


def test_markup_and_brackets_are_shown_as_they_are() -> None:
    assert (
        table([["plugins[cpu].weight", "[bold]x[/bold]"]], header=False)
        == "plugins[cpu].weight  [bold]x[/bold]"
    )


def test_a_terminal_gets_colour_and_its_width() -> None:
    shown = table(ROWS, screen=Screen(colour=True, width=24), marked=0)
    assert "\x1b[" in shown
    assert max(len(line) for line in _without_escapes(shown).splitlines()) <= 24


def _without_escapes(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_only_a_terminal_without_no_color_gets_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "90")
    assert screen_of(io.StringIO()) == PLAIN
    assert screen_of(Terminal()) == Screen(colour=True, width=90)
    monkeypatch.setenv("NO_COLOR", "1")
    assert screen_of(Terminal()) == PLAIN
