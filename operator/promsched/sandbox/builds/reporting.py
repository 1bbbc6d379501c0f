"""Progress of long install steps: what a Go build is downloading or compiling, how far, how long.

A first `promsched sandbox install` spends minutes in `go build`; without a word every few seconds a
newcomer cannot tell a build from a hang. `go build -v` names each package as it compiles it and the
go command names each module it downloads; `BuildProgress` counts those lines and says where the build
is. On a terminal the report is rich's progress bar, redrawn in place; elsewhere (CI, a log file, a
pipe) it is a plain line at most every 10 seconds, so logs stay short.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

# `go: downloading k8s.io/api v0.37.2`
_DOWNLOADING = re.compile(r"^go: downloading (\S+) (\S+)$")
# What `go build -v` prints per package: an import path, nothing else on the line.
_PACKAGE = re.compile(r"^[A-Za-z0-9_.~\-]+(/[A-Za-z0-9_.~\-+]+)*$")
PLAIN_INTERVAL = 10.0
TERMINAL_INTERVAL = 1.0


def console_for(stream: TextIO, terminal: bool | None = None) -> Console:
    """A console for `stream` that redraws only on an interactive terminal, and not in CI, whose logs
    would keep every redraw (rich alone knows no CI); `terminal` forces one way or the other."""
    if terminal is not None:
        return Console(file=stream, force_terminal=terminal, force_interactive=terminal)
    return Console(file=stream, force_interactive=False if os.environ.get("CI") else None)


@dataclass
class BuildProgress:
    """Follows one build's output lines; `line()` says what it is doing now."""

    label: str
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=0.0)
    downloads: int = 0
    packages: int = 0
    current: str = ""
    other_lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.started = self.started or self.clock()

    def feed(self, raw: str) -> None:
        text = raw.rstrip("\n")
        downloading = _DOWNLOADING.match(text)
        if downloading:
            self.downloads += 1
            self.current = f"downloading {downloading[1]} {downloading[2]}"
        elif _PACKAGE.match(text) and ("/" in text or "." not in text):
            self.packages += 1
            self.current = f"compiling {text}"
        elif text:
            # Compiler errors and warnings: kept for the failure message, not counted.
            self.other_lines.append(text)

    def status(self) -> str:
        counts = f"{self.downloads} module(s) downloaded, {self.packages} package(s) compiled"
        return f"{counts}; {self.current}" if self.current else counts

    def line(self) -> str:
        elapsed = int(self.clock() - self.started)
        return f"  {self.label}: {elapsed // 60}m{elapsed % 60:02d}s, {self.status()}"


class DoingColumn(ProgressColumn):
    """What the build does now: the one column a narrow terminal shortens, with an ellipsis."""

    def render(self, task: Task) -> Text:
        return Text(task.description, no_wrap=True, overflow="ellipsis")


class ProgressPrinter:
    """Shows a `BuildProgress`: a progress bar redrawn in place on a terminal (`terminal` forces one way or
    the other), a plain line every 10 s elsewhere."""

    def __init__(self, stream: TextIO = sys.stderr, *, terminal: bool | None = None) -> None:
        self.stream = stream
        self.console = console_for(stream, terminal)
        self.terminal = self.console.is_interactive
        self.interval = TERMINAL_INTERVAL if self.terminal else PLAIN_INTERVAL
        self._bar: Progress | None = None
        self._task = TaskID(0)

    def show(self, progress: BuildProgress) -> None:
        if not self.terminal:
            self.stream.write(progress.line() + "\n")
            self.stream.flush()
            return
        if self._bar is None:
            self._bar = Progress(
                SpinnerColumn(table_column=Column(no_wrap=True)),
                TextColumn(progress.label, markup=False, table_column=Column(no_wrap=True)),
                # Pulses: a build does not say how many packages it has.
                BarColumn(bar_width=20, table_column=Column(no_wrap=True)),
                TimeElapsedColumn(table_column=Column(no_wrap=True)),
                DoingColumn(),
                console=self.console,
                auto_refresh=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(progress.status(), total=None)
        self._bar.update(self._task, description=progress.status())
        self._bar.refresh()

    def finish(self) -> None:
        """Leave the bar's last state behind before the next report."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class CountProgress:
    """How many of `total` things are done so far (nodes Ready, say): a bar on a terminal, gone once done;
    elsewhere a plain line to `report` every 10 s, so a short wait says nothing and a long one how far
    it is."""

    def __init__(
        self,
        label: str,
        total: int,
        report: Callable[[str], None],
        stream: TextIO = sys.stderr,
        *,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.total, self.report, self.clock = label, total, report, clock
        console = console_for(stream, terminal)
        self._bar: Progress | None = None
        if console.is_interactive:
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn(label, markup=False),
                BarColumn(bar_width=30),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                auto_refresh=False,
                transient=True,
            )
        self._task = TaskID(0)
        self._shown = clock()

    def __enter__(self) -> CountProgress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, done: int) -> int:
        """Show `done`, and give it back (for use inside a wait's condition)."""
        if self._bar is not None:
            self._bar.update(self._task, completed=done)
            self._bar.refresh()
        elif self.clock() - self._shown >= PLAIN_INTERVAL:
            self._shown = self.clock()
            self.report(f"  {self.label}: {done}/{self.total}")
        return done
