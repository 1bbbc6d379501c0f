"""Progress of long install steps: what a Go build is downloading or compiling, how far, how long.

A first `promsched sandbox install` spends minutes in `go build`; without a word every few seconds a
newcomer cannot tell a build from a hang. `go build -v` names each package as it compiles it and the
go command names each module it downloads; `BuildProgress` counts those lines and says where the build
is. On a terminal the report is one line that updates in place; elsewhere (CI, a log file) it is a
plain line at most every `interval` seconds, so logs stay short.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

# `go: downloading k8s.io/api v0.37.2`
_DOWNLOADING = re.compile(r"^go: downloading (\S+) (\S+)$")
# What `go build -v` prints per package: an import path, nothing else on the line.
_PACKAGE = re.compile(r"^[A-Za-z0-9_.~\-]+(/[A-Za-z0-9_.~\-+]+)*$")
PLAIN_INTERVAL = 10.0
TERMINAL_INTERVAL = 1.0


def on_terminal(stream: TextIO) -> bool:
    """Whether progress may redraw a line: a terminal, and not CI (whose logs keep every redraw)."""
    return stream.isatty() and not os.environ.get("CI")


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

    def line(self) -> str:
        elapsed = int(self.clock() - self.started)
        counts = f"{self.downloads} module(s) downloaded, {self.packages} package(s) compiled"
        doing = f"; {self.current}" if self.current else ""
        return f"  {self.label}: {elapsed // 60}m{elapsed % 60:02d}s, {counts}{doing}"


class ProgressPrinter:
    """Prints a `BuildProgress` line: redrawn in place on a terminal, a plain line every 10 s elsewhere."""

    def __init__(self, stream: TextIO = sys.stderr, *, terminal: bool | None = None) -> None:
        self.stream = stream
        self.terminal = on_terminal(stream) if terminal is None else terminal
        self.interval = TERMINAL_INTERVAL if self.terminal else PLAIN_INTERVAL
        self._width = 0

    def show(self, progress: BuildProgress) -> None:
        text = progress.line()
        if self.terminal:
            columns = _columns()
            text = text[: columns - 1]
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """Leave the updated line behind before the next report."""
        if self.terminal and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        return 100
