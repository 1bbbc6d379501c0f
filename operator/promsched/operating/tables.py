"""Tables drawn by rich, for a terminal or for a pipe.

In a pipe, a file, or with NO_COLOR set, a table is plain text: left-aligned columns two spaces apart,
as wide as their cells, no trailing blanks, so scripts and tests read stable output. On a terminal it
gets colour, and its columns wrap to the terminal's width instead of running past it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console
from rich.table import Table

# Wider than any table: plain output is never wrapped.
_UNBOUNDED = 100_000


@dataclass(frozen=True)
class Screen:
    """Where the text goes: colour on or off, and the width to fit (None: the rows' own width)."""

    colour: bool = False
    width: int | None = None


PLAIN = Screen()


def screen_of(stream: TextIO) -> Screen:
    """A terminal that takes colour gets colour and its width; anything else (NO_COLOR too) plain text."""
    console = Console(file=stream)
    if not console.is_terminal or console.no_color or console.is_dumb_terminal:
        return PLAIN
    return Screen(colour=True, width=console.width)


def table(
    rows: Sequence[Sequence[str]],
    *,
    screen: Screen = PLAIN,
    header: bool = True,
    right: Sequence[int] = (),
    indent: int = 0,
    marked: int | None = None,
) -> str:
    """`rows` as columns, the first row a header when `header`; `right`: the columns aligned right;
    `indent`: spaces before every line; `marked`: a row (counted after the header) shown in colour."""
    grid = Table(
        box=None,
        pad_edge=False,
        padding=(0, 1),
        show_header=header,
        show_edge=False,
        header_style="bold" if screen.colour else "",
    )
    first, *rest = rows
    for index, heading in enumerate(first if header else range(len(first))):
        grid.add_column(
            str(heading) if header else "",
            justify="right" if index in right else "left",
            no_wrap=screen.width is None,
            overflow="fold",
        )
    for index, row in enumerate(rest if header else rows):
        grid.add_row(*row, style="green" if screen.colour and index == marked else None)
    buffer = io.StringIO()
    width = (screen.width or _UNBOUNDED) - indent
    Console(
        file=buffer,
        width=width,
        color_system="standard" if screen.colour else None,
        force_terminal=screen.colour,
        highlight=False,
        emoji=False,
        markup=False,
    ).print(grid)
    return "\n".join(" " * indent + line.rstrip() for line in buffer.getvalue().splitlines())
