"""A clock that tests move by hand, for code that takes a `clock: Callable[[], float]`."""

from __future__ import annotations


class Clock:
    """Reads `now`; a test sets it, or moves it on with `advance`."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
