"""Waiting in tests: poll with a deadline, never sleep a fixed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def eventually(
    probe: Callable[[], T], accept: Callable[[T], bool], timeout: float = 60.0, what: str = ""
) -> T:
    """Poll `probe` until `accept` holds for its value; fail with the last value at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what or 'condition'} still not met after {timeout:.0f}s; last value: {value!r}")
        time.sleep(0.25)


async def eventually_async(condition: Callable[[], bool], within: float = 10.0, what: str = "") -> None:
    """Let the event loop run until `condition` holds; fail at the deadline."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what or 'condition'} still not met after {within:.0f}s")
        await asyncio.sleep(0.01)
