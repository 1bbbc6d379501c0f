"""How far the intake has followed each object of one kind: the guard that lets a state only move forward.

etcd's resourceVersions grow with every write, so of two states of one object the one with the larger
version is the later. Kopf's watch events and the intake's own lists deliver states in no order between
them: a list page read before a delete may arrive after the DELETED event. `Versions` keeps, for one
kind, the version of every object held, a tombstone (the deletion's version) for each object deleted,
and the version of the newest complete list.

A complete list at version L shows every object that existed at L. So an object neither held nor
tombstoned that arrives in a state no newer than L was deleted before L (the list would have shown it
otherwise): it is refused, and the tombstones no newer than L can go.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain

# Tombstones kept per kind between two complete lists; beyond this the oldest go first. Only a state
# older than a forgotten deletion, arriving after that many later deletions, could still come back.
MAX_TOMBSTONES = 20_000


@dataclass(frozen=True, slots=True)
class Held:
    """An object the cache holds: the version of its state (0 when not etcd's), and its names for logs
    and for removing it."""

    version: int
    namespace: str
    name: str


class Versions:
    """The version guard of one kind, by object key."""

    def __init__(self, max_tombstones: int = MAX_TOMBSTONES) -> None:
        self.held: dict[str, Held] = {}
        self.tombstones: dict[str, int] = {}  # key -> the version of its deletion, oldest first
        self.listed_at = 0  # the version of the newest complete list
        self.max_tombstones = max_tombstones

    def admit(self, key: str, version: int | None, namespace: str, name: str, *, deleted: bool) -> bool:
        """Whether a watch event's state is no older than what is known of the object (an equal one is
        the same state again); if so it is recorded, and the caller applies it."""
        if version is not None:
            held = self.held.get(key)
            if held is not None:
                if version < held.version:
                    return False
            elif key in self.tombstones:
                if version <= self.tombstones[key]:
                    return False
            elif version <= self.listed_at:
                return False
        self._record(key, version, namespace, name, deleted=deleted)
        return True

    def left(self, key: str, version: int) -> None:
        """The object left a filtered watch at `version`, which does not say for where: its states older
        than that are refused from now on, and the one at `version` (seen on another watch) is not."""
        held = self.held.get(key)
        if held is None or held.version < version:
            self._record(key, version - 1, "", "", deleted=True)

    def take_listed(self, key: str, version: int | None, namespace: str, name: str) -> str:
        """Record a state read from a list, if it changes what is held: "added" (the object was missing)
        or "updated" (an older state was held); "" when it changes nothing, and is not to be applied."""
        held = self.held.get(key)
        if version is not None:
            if held is not None and version <= held.version:
                return ""
            if held is None and version <= self.tombstones.get(key, -1):
                return ""  # deleted since the list was read
        self._record(key, version, namespace, name, deleted=False)
        return "added" if held is None else "updated"

    def missing_from(
        self, listed: Iterable[str], list_version: int, unheld: Iterable[tuple[str, Held]] = ()
    ) -> list[tuple[str, Held]]:
        """The objects held at a version no newer than a complete list's that the list lacks: deleted
        before the list was read, whether or not their DELETED event arrived. `unheld`: objects the
        cache still has that are not held here, each with the version of the state it has; judged alike."""
        shown = set(listed)
        return [
            (key, held)
            for key, held in chain(self.held.items(), unheld)
            if held.version <= list_version and key not in shown
        ]

    def remove(self, key: str, list_version: int) -> None:
        """A complete list at `list_version` lacks the object: deleted no later than that."""
        self._record(key, list_version, "", "", deleted=True)

    def listed(self, list_version: int) -> None:
        """A complete list was read at `list_version`: tombstones no newer are no longer needed."""
        self.listed_at = max(self.listed_at, list_version)
        self.tombstones = {
            key: version for key, version in self.tombstones.items() if version > self.listed_at
        }

    def _record(self, key: str, version: int | None, namespace: str, name: str, *, deleted: bool) -> None:
        if not deleted:
            # Interned: the same strings as the parsed object's, not a copy per event.
            self.held[key] = Held(version or 0, sys.intern(namespace), sys.intern(name))
            self.tombstones.pop(key, None)
            return
        self.held.pop(key, None)
        if version is None or version <= self.listed_at:
            return  # no later state can be mistaken for it: the list's version judges those
        buried = max(version, self.tombstones.pop(key, version))
        self.tombstones[key] = buried
        while len(self.tombstones) > self.max_tombstones:
            del self.tombstones[next(iter(self.tombstones))]
