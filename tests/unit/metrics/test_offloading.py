"""The metrics worker's pacing: pauses only on the worker and only under the operator's loop, one per
`PACE_EVERY` items, each until the loop waits for I/O, which the loop's selector tells; and what is let
go, freed on the worker in paced steps."""

from __future__ import annotations

import asyncio
import selectors
import socket
import threading
from collections.abc import Iterator

import pytest

from promsched.metrics import offloading
from promsched.metrics.offloading import LoopWaits
from support.polling import eventually


class RecordedWaits(LoopWaits):
    """A loop's waits whose every change and pause is recorded; pausing never blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def loop_begins_waiting(self) -> None:
        self.calls.append("begins")
        super().loop_begins_waiting()

    def loop_ends_waiting(self) -> None:
        self.calls.append("ends")
        super().loop_ends_waiting()

    def pause(self, seconds: float) -> None:
        self.calls.append(f"pause {seconds}")


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> RecordedWaits:
    recorded = RecordedWaits()
    monkeypatch.setattr(offloading._Operators, "waits", recorded)
    return recorded


def on_worker(items: int) -> list[int]:
    """`paced(range(items))` walked on the metrics worker."""

    async def walk() -> list[int]:
        return await offloading.off_loop(lambda: list(offloading.paced(range(items))))

    return asyncio.run(walk())


PAUSE = f"pause {offloading.MAX_PAUSE_SECONDS}"


@pytest.mark.parametrize(
    "items", [0, 1, offloading.PACE_EVERY, offloading.PACE_EVERY + 1, 3 * offloading.PACE_EVERY]
)
def test_the_worker_pauses_before_every_pace_of_items(waits: RecordedWaits, items: int) -> None:
    assert on_worker(items) == list(range(items))
    assert waits.calls == [PAUSE] * -(-items // offloading.PACE_EVERY)


def test_other_threads_never_pause(waits: RecordedWaits) -> None:
    items = 3 * offloading.PACE_EVERY
    assert list(offloading.paced(range(items))) == list(range(items))
    offloading.pause()
    assert waits.calls == []


def test_the_worker_pauses_before_one_long_step(waits: RecordedWaits) -> None:
    async def step() -> None:
        await offloading.off_loop(offloading.pause)

    asyncio.run(step())
    assert waits.calls == [PAUSE]


def test_under_another_loop_nothing_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offloading._Operators, "waits", None)
    items = 3 * offloading.PACE_EVERY
    assert on_worker(items) == list(range(items))


class Freed:
    """Says which thread freed it."""

    def __init__(self, threads: list[str]) -> None:
        self.threads = threads

    def __del__(self) -> None:
        self.threads.append(threading.current_thread().name)


def test_what_is_let_go_is_freed_on_the_worker_a_dict_emptied_in_paces(waits: RecordedWaits) -> None:
    threads: list[str] = []
    entries = {index: Freed(threads) for index in range(offloading.PACE_EVERY + 1)}
    offloading.let_go(Freed(threads), emptied=[entries])
    eventually(lambda: len(threads), lambda freed: freed == offloading.PACE_EVERY + 2, timeout=30)
    assert entries == {}
    assert all(thread.startswith(offloading.WORKER_NAME) for thread in threads)
    # A pause before each pace of the dict's entries, and one before the rest is dropped.
    assert waits.calls == [PAUSE] * 3


def paused_in_thread(waits: LoopWaits) -> threading.Thread:
    """A thread pausing (for a minute at most) in `waits`, once it is paused."""
    pausing = threading.Thread(target=waits.pause, args=(60.0,), daemon=True)
    pausing.start()
    eventually(lambda: waits.worker_paused, bool, timeout=30, what="the thread pauses")
    return pausing


def test_a_pause_ends_when_the_loop_begins_to_wait() -> None:
    waits = LoopWaits()
    for _ in range(2):  # and again: the wake-up is ready for the next pause
        pausing = paused_in_thread(waits)
        waits.loop_begins_waiting()
        pausing.join(timeout=30)
        assert not pausing.is_alive()
        assert not waits.worker_paused
        waits.loop_ends_waiting()


def test_no_pause_while_the_loop_waits() -> None:
    waits = LoopWaits()
    waits.loop_begins_waiting()
    pausing = threading.Thread(target=waits.pause, args=(60.0,), daemon=True)
    pausing.start()
    pausing.join(timeout=30)
    assert not pausing.is_alive()


@pytest.fixture
def ready_socket() -> Iterator[socket.socket]:
    """A socket with data waiting to be read."""
    reader, writer = socket.socketpair()
    writer.send(b"x")
    yield reader
    reader.close()
    writer.close()


def test_the_loops_selector_says_when_it_waits(ready_socket: socket.socket) -> None:
    recorded = RecordedWaits()
    selector = offloading._WaitSignallingSelector(recorded)
    try:
        selector.register(ready_socket, selectors.EVENT_READ)
        # asyncio asks with timeout 0 while callbacks are ready: that is no wait.
        assert len(selector.select(0)) == 1
        assert recorded.calls == []
        assert len(selector.select(1.0)) == 1
        assert len(selector.select(None)) == 1
        assert recorded.calls == ["begins", "ends", "begins", "ends"]
        assert not recorded.loop_waits
    finally:
        selector.close()


def test_the_operators_loop_tells_its_waits_until_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offloading._Operators, "waits", None)
    loop = offloading.new_event_loop()
    try:
        waits = offloading._Operators.waits
        assert waits is not None
        woke_from_wait: list[bool] = []
        loop.call_later(0.001, lambda: woke_from_wait.append(not waits.loop_waits))
        loop.run_until_complete(asyncio.sleep(0.002))
        assert woke_from_wait == [True]
        # A paused worker is woken by the loop's next wait.
        pausing = paused_in_thread(waits)
        loop.run_until_complete(asyncio.sleep(0.001))
        pausing.join(timeout=30)
        assert not pausing.is_alive()
        items = 3 * offloading.PACE_EVERY
        walked = loop.run_until_complete(offloading.off_loop(lambda: list(offloading.paced(range(items)))))
        assert walked == list(range(items))
    finally:
        loop.close()
    assert offloading._Operators.waits is None
