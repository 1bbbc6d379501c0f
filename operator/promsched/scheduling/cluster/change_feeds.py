"""Which keys changed since a given moment, so what is derived per key is brought up to date by the
keys that changed rather than by all of them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(slots=True)
class ChangeFeed:
    """`count` changes so far; each key with the count at its latest change, in that order."""

    count: int = 0
    latest: dict[str, int] = field(default_factory=dict)

    def mark(self, key: str) -> None:
        self.count += 1
        self.latest.pop(key, None)  # to the end: the dict stays in count order
        self.latest[key] = self.count

    def since(self, count: int) -> Iterator[str]:
        """The keys changed after `count` was the count, latest first."""
        for key, changed in reversed(self.latest.items()):
            if changed <= count:
                return
            yield key
