"""py-spy's raw profile of the scheduler, as the tables that close results.md: its busy samples by part
of the operator, and the functions with the most samples, on the stack and on top."""

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


# The parts of the operator a busy sample is put in: the first with a marker in a frame of its stack
# (Kopf's `run`, under which the whole operator runs, aside), or, for a marker starting "@top:", in its
# top frame.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("promsched's handlers, under Kopf", ("_event (promsched/operating/wiring.py)",)),
    ("Kopf's own: its watch streams, per-object workers and handler machinery", ("(kopf/",)),
    ("the scheduling cycle (queue, filters, scores, decision)", ("Scheduler.schedule_one ",)),
    ("the bindings and events sent (the HTTP client)", ("Binder.", "WriteQueue.")),
    ("the bound pods' watch (promsched's own)", ("BoundPods.follow ",)),
    ("promsched's other watches", ("Reflector.follow ",)),
    # Before the refreshes: the loop's selector (`offloading.new_event_loop`'s) is in promsched/metrics/.
    ("waiting on sockets (epoll)", ("@top:EpollSelector.select ",)),
    ("metrics refreshes", ("(promsched/metrics/",)),
    (
        "reading and writing sockets (TLS, and HTTP parsing as data arrives)",
        ("(asyncio/sslproto.py)", "(ssl.py)", "_SelectorSocketTransport."),
    ),
)
OTHER_PART = "the rest (the event loop, timers, task switches)"
_KOPF_RUN = "run (kopf/_core/reactor/running.py)"


def part_of(frames: list[str]) -> str:
    """The part (of PARTS) a busy sample's stack, outermost frame first, is in."""
    inner = [frame for frame in frames if frame != _KOPF_RUN]
    for part, markers in PARTS:
        for marker in markers:
            if marker.startswith("@top:"):
                if frames and frames[-1].startswith(marker[5:]):
                    return part
            elif any(marker in frame for frame in inner):
                return part
    return OTHER_PART


def profile_summary(path: Path, top: int = 20) -> list[str]:
    """The event-loop thread's busy samples by part of the operator (PARTS), then the functions with the
    most of them on the stack (inclusive) and on top (self), as percentages of those samples."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    parts: Counter[str] = Counter()
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
        parts[part_of(frames)] += count
        for frame in set(frames):
            if not frame.startswith(_ENVELOPE):
                inclusive[frame] += count
    if not total:
        return ["(no samples)"]
    lines = [
        f"{total} busy samples ({total / 100:.0f} s at 100 Hz; {idle} samples of an idle thread-pool worker "
        "left out). Percentages of the busy samples.",
        "",
        "By part of the operator (each sample in the first part of this list on its stack):",
        "",
        "| % | Part |",
        "| ---: | --- |",
        *(f"| {100 * parts[part] / total:.1f} | {part} |" for part, _ in (*PARTS, (OTHER_PART, ()))),
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
