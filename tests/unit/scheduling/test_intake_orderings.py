"""The intake's pod watches and a relist in random orders (issue 43): Kopf's watch of unbound pods, the
watch of bound pods and a list read a pod a page, their events interleaved at random. When both watches
deliver every event, whatever the list changed is explained (no drift), and the cache ends as the
cluster is."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from promsched.scheduling.intake.kinds import PODS
from support.intakes import GRACE, Setup, bound, build, drift
from support.objects import node_object, pod_object
from support.watchers import ScriptedWatcher

HISTORIES = 200


@dataclass(frozen=True)
class Event:
    """One watch's event: `on_bound` for the watch of bound pods, else Kopf's watch of unbound ones."""

    on_bound: bool
    type: str
    obj: dict[str, Any]

    @property
    def version(self) -> int:
        return int(self.obj["metadata"]["resourceVersion"])


def pod_history(rng: random.Random) -> list[Event]:
    """A few pods' events in the order of their versions: each created waiting, then bound (one version,
    on both watches: Kopf's loses the pod as the other gains it) or deleted; a bound one changes, and
    may be deleted."""
    names = [f"p{index}" for index in range(rng.randint(1, 5))]
    states: dict[str, str] = {}
    events: list[Event] = []
    version = 10
    for _ in range(rng.randint(3, 16)):
        name = rng.choice(names)
        state = states.get(name, "new")
        if state == "gone":
            continue
        version += 1
        if state == "new":
            states[name] = "waiting"
            events.append(Event(False, "ADDED", pod_object(name, version=str(version))))
        elif state == "waiting":
            events.append(Event(False, "DELETED", pod_object(name, version=str(version))))
            states[name] = "bound" if rng.random() < 0.8 else "gone"
            if states[name] == "bound":
                events.append(Event(True, "ADDED", bound(name, version)))
        elif rng.random() < 0.6:
            events.append(Event(True, "MODIFIED", bound(name, version)))
        else:
            states[name] = "gone"
            events.append(Event(True, "DELETED", bound(name, version)))
    return events


def cluster_at(events: list[Event], version: int) -> dict[str, dict[str, Any]]:
    """The pods as they were at `version`, by name."""
    pods: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.version > version:
            break
        name = event.obj["metadata"]["name"]
        if event.type == "DELETED":  # deleted, or bound (the next event, at this version)
            pods.pop(name, None)
        else:
            pods[name] = event.obj
    return pods


class Watches:
    """The two watches' events not yet delivered, each watch's in order."""

    def __init__(self, setup: Setup, events: list[Event], rng: random.Random) -> None:
        self.setup = setup
        self.rng = rng
        self.unbound = [event for event in events if not event.on_bound]
        self.bound = [event for event in events if event.on_bound]

    def deliver(self, count: int) -> None:
        """Up to `count` events, each the next of a watch chosen at random."""
        for _ in range(count):
            watches = [events for events in (self.unbound, self.bound) if events]
            if not watches:
                return
            self._deliver(self.rng.choice(watches).pop(0))

    def meanwhile(self, _path: str, _start: int) -> None:
        """As a page of the list is asked for: none, one or two events."""
        self.deliver(self.rng.randint(0, 2))

    def deliver_up_to(self, version: int) -> None:
        """A random part of what each watch has up to `version`."""
        for events in (self.unbound, self.bound):
            ready = sum(1 for event in events if event.version <= version)
            for _ in range(self.rng.randint(0, ready)):
                self._deliver(events.pop(0))

    def _deliver(self, event: Event) -> None:
        if event.on_bound:
            self.setup.intake.on_bound_pod(event.type, event.obj)
        else:
            self.setup.intake.on_event(PODS, event.type, event.obj)


async def test_no_drift_is_counted_whatever_the_order_of_two_watches_and_a_relists_pages() -> None:
    for seed in range(HISTORIES):
        await replay(seed)


async def replay(seed: int) -> None:
    """One random history, its events delivered around a relist in a random order."""
    rng = random.Random(seed)
    events = pod_history(rng)
    last = events[-1].version
    list_version = rng.randint(10, last)
    setup = build(watcher=ScriptedWatcher())
    try:
        setup.serve("nodes", 10, node_object("n1", cpu="64", version="2"))
        setup.serve("pods", 10)
        await setup.intake.sync()
        before = drift("pods")
        watches = Watches(setup, events, rng)
        # What came before the list was asked for is no newer than it; anything may come meanwhile.
        watches.deliver_up_to(list_version)
        listed = cluster_at(events, list_version)
        setup.serve("pods", list_version, *(listed[name] for name in sorted(listed)))
        setup.server.page_size = 1
        setup.server.during_list = watches.meanwhile
        setup.intake.relist(setup.intake.kinds["pods"])
        await setup.listed()
        watches.deliver(len(events))
        while setup.sleeps.count(GRACE):
            setup.sleeps.end(GRACE)
            await setup.listed()
        assert drift("pods") == before, f"history {seed}: {events}, listed at {list_version}"
        now = cluster_at(events, last).values()
        on_nodes = {f"uid-{pod['metadata']['name']}" for pod in now if pod["spec"].get("nodeName")}
        waiting = {f"uid-{pod['metadata']['name']}" for pod in now if not pod["spec"].get("nodeName")}
        assert set(setup.cache.counted) == on_nodes, f"history {seed}"
        assert set(setup.intake.pending) == waiting, f"history {seed}"
    finally:
        setup.background.stop()
