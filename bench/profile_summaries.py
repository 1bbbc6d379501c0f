"""py-spy's raw profile of the scheduler, as the tables that close results.md: the functions with the
most samples of the event-loop thread, on the stack and on top."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def _short(frame: str) -> str:
    """`function (path/to/module.py)` with the path cut to the package."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("site-packages/", "/operator/", "/lib/python3.11/"):
        if marker in where:
            where = where.split(marker, 1)[1]
            break
    return f"{name} ({where})" if where else name


# Frames every busy sample shares (interpreter start-up, the CLI, Kopf's and asyncio's loop): left out of
# the inclusive table, which would otherwise open with a dozen 100% rows.
_ENVELOPE = (
    "_run_module_as_main ",
    "_run_code ",
    "<module> (promsched/cli.py)",
    "main (promsched/cli.py)",
    "_run (promsched/cli.py)",
    "run (promsched/operating/wiring.py)",
    "run (kopf/_core/reactor/running.py)",
    "run (asyncio/runners.py)",
    "Runner.run ",
    "BaseEventLoop.",
    "Handle._run ",
)
# A thread-pool worker waiting on its queue (no frame below it) is idle; py-spy does not always see it so.
_IDLE_LEAVES = ("_worker (concurrent/futures/thread.py)",)


def profile_summary(path: Path, top: int = 20) -> list[str]:
    """The functions with the most samples of the event-loop thread: on the stack (inclusive) and on
    top (self), as percentages of that thread's busy samples."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = idle = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        if frames[-1] in _IDLE_LEAVES:
            idle += count
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            if not frame.startswith(_ENVELOPE):
                inclusive[frame] += count
    if not total:
        return ["(no samples)"]
    lines = [
        f"{total} busy samples ({total / 100:.0f} s at 100 Hz; {idle} samples of an idle thread-pool worker "
        "left out). Percentages of the busy samples.",
        "",
        "Inclusive (on the stack; the event loop and CLI frames every sample shares are left out):",
        "",
        "| % | Function |",
        "| ---: | --- |",
    ]
    lines += [f"| {100 * n / total:.1f} | `{name}` |" for name, n in inclusive.most_common(top)]
    lines += ["", "Self (on top of the stack):", "", "| % | Function |", "| ---: | --- |"]
    lines += [f"| {100 * n / total:.1f} | `{name}` |" for name, n in own.most_common(top)]
    return lines
