"""Waiting in tests: poll with a deadline, never sleep a fixed time."""

from __future__ import annotations

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
