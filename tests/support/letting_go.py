"""A stand-in for `offloading.let_go` that records which query answers were let go, then lets them go."""

from __future__ import annotations

from promsched.metrics import offloading
from promsched.metrics.samples import QueryResult


class LettingGo:
    """Patched over `offloading.let_go`: `queries` are those of the answers it was handed."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self._let_go = offloading.let_go

    def __call__(self, *held: object) -> None:
        self.queries.extend(item.query for item in held if isinstance(item, QueryResult))
        self._let_go(*held)
