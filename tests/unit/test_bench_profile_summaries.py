"""The profile summary that closes `make bench --profile`'s results: each busy sample in one part of the
operator, so a run tells what Kopf's own machinery costs beside the scheduler's work."""

from __future__ import annotations

from pathlib import Path

from bench.profile_summaries import OTHER_PART, PARTS, part_of, profile_summary

LOOP = (
    "run (kopf/_core/reactor/running.py)",
    "BaseEventLoop._run_once (asyncio/base_events.py)",
    "Handle._run (asyncio/events.py)",
)
KOPF = (
    *LOOP,
    "worker (kopf/_core/reactor/queueing.py)",
    "process_resource_event (kopf/_core/reactor/processing.py)",
)
EPOLL = (*LOOP, "EpollSelector.select (selectors.py)")
KOPFS_OWN = "Kopf's own: its watch streams, per-object workers and handler machinery"


def part(name: str) -> str:
    """The part whose description starts with `name`."""
    (found,) = (description for description, _ in (*PARTS, (OTHER_PART, ())) if description.startswith(name))
    return found


def test_each_sample_is_put_in_the_first_part_on_its_stack() -> None:
    assert part_of(list(KOPF)) == KOPFS_OWN
    handler = [
        *KOPF,
        "kind_event (promsched/operating/wiring.py)",
        "Intake.on_event (promsched/scheduling/intake/following.py)",
    ]
    assert part_of(handler) == part("promsched's handlers")
    cycle = [
        *LOOP,
        "Scheduler.run (promsched/scheduling/schedulers.py)",
        "Scheduler.schedule_one (promsched/x.py)",
    ]
    assert part_of(cycle) == part("the scheduling cycle")
    assert part_of(list(EPOLL)) == part("waiting on sockets")
    # The operator's loop waits in a selector of promsched's own, which wraps epoll's.
    signalling = "_WaitSignallingSelector.select (promsched/metrics/offloading.py)"
    assert part_of([*LOOP, signalling, EPOLL[-1]]) == part("waiting on sockets")
    refresh = [*LOOP, "Refresher.refresh (promsched/metrics/refreshing.py)"]
    assert part_of(refresh) == part("metrics refreshes")
    tls = [*LOOP, "SSLProtocol._do_read (asyncio/sslproto.py)", "SSLObject.read (ssl.py)"]
    assert part_of(tls) == part("reading and writing sockets")
    # Kopf's `run`, under which every task runs, does not make every sample Kopf's.
    assert part_of(list(LOOP)) == OTHER_PART


def test_the_summary_opens_with_the_parts_shares(tmp_path: Path) -> None:
    profile = tmp_path / "profile.txt"
    profile.write_text(f"{';'.join(KOPF)} 3\n{';'.join(EPOLL)} 1\n")
    lines = profile_summary(profile)
    kopf_row = f"| 75.0 | {KOPFS_OWN} |"
    assert kopf_row in lines
    assert "| 25.0 | waiting on sockets (epoll) |" in lines
    assert lines.index(kopf_row) < next(i for i, line in enumerate(lines) if line.startswith("Inclusive"))
