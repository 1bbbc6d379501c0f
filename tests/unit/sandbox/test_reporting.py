"""Long Go builds say what they are doing, so a first install never looks like a hang."""

from __future__ import annotations

import io
import re
import sys
import textwrap
from pathlib import Path

import pytest

from promsched.sandbox.builds.installing import run_with_progress
from promsched.sandbox.builds.reporting import BuildProgress, CountProgress, ProgressPrinter
from support.clocks import Clock

GO_OUTPUT = """\
go: downloading k8s.io/api v0.37.2
go: downloading github.com/spf13/cobra v1.8.1
internal/abi
fmt
k8s.io/apimachinery/pkg/util/sets
# k8s.io/kubernetes/cmd/broken
cmd/broken/main.go:3:1: syntax error: non-declaration statement outside function body
"""


def test_downloads_and_packages_are_counted_and_the_latest_is_named() -> None:
    clock = Clock(100.0)
    progress = BuildProgress("Kubernetes v1.37.2", clock=clock)
    for line in GO_OUTPUT.splitlines(keepends=True)[:5]:
        progress.feed(line)
    clock.now += 151
    assert progress.line() == (
        "  Kubernetes v1.37.2: 2m31s, 2 module(s) downloaded, 3 package(s) compiled; "
        "compiling k8s.io/apimachinery/pkg/util/sets"
    )


def test_compiler_errors_are_kept_for_the_failure_message_not_counted() -> None:
    progress = BuildProgress("etcd")
    for line in GO_OUTPUT.splitlines():
        progress.feed(line)
    assert progress.packages == 3
    assert progress.other_lines == [
        "# k8s.io/kubernetes/cmd/broken",
        "cmd/broken/main.go:3:1: syntax error: non-declaration statement outside function body",
    ]


def test_a_log_gets_plain_lines_and_a_terminal_one_line_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    progress = BuildProgress("helm")
    progress.feed("go: downloading helm.sh/helm/v3 v3.22.0\n")
    plain = io.StringIO()
    printer = ProgressPrinter(plain, terminal=False)
    printer.show(progress)
    printer.show(progress)
    printer.finish()
    assert plain.getvalue().count("\n") == 2
    assert "\r" not in plain.getvalue()
    assert printer.interval == 10.0

    terminal = io.StringIO()
    printer = ProgressPrinter(terminal, terminal=True)
    printer.show(progress)
    progress.feed("helm.sh/helm/v3/pkg/chart\n")
    printer.show(progress)
    printer.finish()
    assert printer.interval == 1.0
    drawn = terminal.getvalue()
    assert "\x1b[2K" in drawn  # redrawn in place: each draw erases the line before it
    *earlier, last = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn).split("\r")
    first = "1 module(s) downloaded, 0 package(s) compiled; downloading helm.sh/helm/v3 v3.22.0"
    assert any(draw.endswith(first) for draw in earlier)
    assert " helm " in last
    assert last.endswith(
        "1 module(s) downloaded, 1 package(s) compiled; compiling helm.sh/helm/v3/pkg/chart\n"
    )


def test_ci_and_pipes_get_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("TERM", "xterm")
    assert ProgressPrinter(Terminal()).terminal is False
    monkeypatch.delenv("CI")
    monkeypatch.delenv("TTY_INTERACTIVE", raising=False)
    assert ProgressPrinter(Terminal()).terminal is True
    assert ProgressPrinter(io.StringIO()).terminal is False


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_running_build_is_reported_while_it_runs_and_its_output_drained(tmp_path: Path) -> None:
    script = tmp_path / "fake_go.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            sys.stderr.write({GO_OUTPUT!r})
            sys.stderr.flush()
            time.sleep(1)
            sys.exit(2)
            """
        )
    )
    out = io.StringIO()
    printer = ProgressPrinter(out, terminal=False)
    printer.interval = 0.05
    progress = BuildProgress("fake")
    returncode = run_with_progress([sys.executable, str(script)], None, {}, progress, printer)
    assert returncode == 2
    assert (progress.downloads, progress.packages) == (2, 3)
    assert "fake: 0m0" in out.getvalue()


def test_a_count_is_a_bar_on_a_terminal_and_a_line_every_10_s_elsewhere() -> None:
    clock = Clock(0.0)
    lines: list[str] = []
    with CountProgress(
        "node(s) Ready", 1000, lines.append, io.StringIO(), terminal=False, clock=clock
    ) as ready:
        assert ready.update(10) == 10
        clock.now += 10
        ready.update(400)
        clock.now += 5
        ready.update(700)
    assert lines == ["  node(s) Ready: 400/1000"]  # nothing before 10 s, then once per 10 s

    screen = io.StringIO()
    with CountProgress("node(s) Ready", 1000, lines.append, screen, terminal=True) as ready:
        ready.update(400)
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    assert "node(s) Ready" in drawn
    assert "400/1000" in drawn
    assert lines == ["  node(s) Ready: 400/1000"]  # the bar, not lines
