"""The metrics worker's pacing: pauses only on the worker and only under the operator's loop, one per
`PACE_EVERY` items; the loop's selector says when it waits for I/O."""

from __future__ import annotations

import asyncio
import selectors
import socket
import threading
from collections.abc import Iterator

import pytest

from promsched.metrics import offloading


class RecordedWaits(threading.Event):
    """A loop's waits whose every set, clear and wait is recorded; waiting never blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def set(self) -> None:
        self.calls.append("set")
        super().set()

    def clear(self) -> None:
        self.calls.append("clear")
        super().clear()

    def wait(self, timeout: float | None = None) -> bool:
        self.calls.append(f"wait {timeout}")
        return True


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> RecordedWaits:
    recorded = RecordedWaits()
    monkeypatch.setattr(offloading._LoopWaits, "event", recorded)
    return recorded


def on_worker(items: int) -> list[int]:
    """`paced(range(items))` walked on the metrics worker."""

    async def walk() -> list[int]:
        return await offloading.off_loop(lambda: list(offloading.paced(range(items))))

    return asyncio.run(walk())


@pytest.mark.parametrize(
    "items", [0, 1, offloading.PACE_EVERY, offloading.PACE_EVERY + 1, 3 * offloading.PACE_EVERY]
)
def test_the_worker_pauses_before_every_pace_of_items(waits: RecordedWaits, items: int) -> None:
    assert on_worker(items) == list(range(items))
    pauses = -(-items // offloading.PACE_EVERY)
    assert waits.calls == [f"wait {offloading.MAX_PAUSE_SECONDS}"] * pauses


def test_other_threads_never_pause(waits: RecordedWaits) -> None:
    items = 3 * offloading.PACE_EVERY
    assert list(offloading.paced(range(items))) == list(range(items))
    offloading.pause()
    assert waits.calls == []


def test_the_worker_pauses_before_one_long_step(waits: RecordedWaits) -> None:
    async def step() -> None:
        await offloading.off_loop(offloading.pause)

    asyncio.run(step())
    assert waits.calls == [f"wait {offloading.MAX_PAUSE_SECONDS}"]


def test_under_another_loop_nothing_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offloading._LoopWaits, "event", None)
    items = 3 * offloading.PACE_EVERY
    assert on_worker(items) == list(range(items))


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
        assert recorded.calls == ["set", "clear", "set", "clear"]
        assert not recorded.is_set()
    finally:
        selector.close()


def test_the_operators_loop_signals_its_waits_until_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offloading._LoopWaits, "event", None)
    loop = offloading.new_event_loop()
    try:
        waits = offloading._LoopWaits.event
        assert waits is not None
        woke_from_wait: list[bool] = []
        loop.call_later(0.001, lambda: woke_from_wait.append(not waits.is_set()))
        loop.run_until_complete(asyncio.sleep(0.002))
        assert woke_from_wait == [True]
        items = 3 * offloading.PACE_EVERY
        walked = loop.run_until_complete(offloading.off_loop(lambda: list(offloading.paced(range(items)))))
        assert walked == list(range(items))
    finally:
        loop.close()
    assert offloading._LoopWaits.event is None
