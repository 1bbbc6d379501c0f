"""Events as kube-scheduler's recorder writes them (client-go's `tools/events`): events.k8s.io/v1,
one object per pod, action and reason, repeats folded into its series.

The first occurrence creates the Event. The second starts its series (a patch: count 2). Later
occurrences only count in memory; a periodic refresh writes the counts that changed (kube: every 30
minutes). A series not observed for `finish_after` seconds (kube: 6 minutes) is finished: its final
count is written (client-go's finishSeries, every 6 minutes; here also when the next occurrence comes
first, when the pod goes, and at shutdown) and the next occurrence creates a new Event. As in kube, the
note is the first occurrence's, so an Event shows why a pod first failed and how often it failed since.
A series patch that finds its Event gone (404) creates it again, count included, as client-go does.

On top of kube, each pod may open at most `burst` new Events, and one more every `per_pod_interval`
seconds: a pod whose failure reason flips cannot create an Event per attempt.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from promsched.kube import requests
from promsched.kube.requests import Request

FINISH_AFTER: Final = 6 * 60.0
REFRESH_EVERY: Final = 30 * 60.0
NEW_EVENTS_BURST: Final = 5
NEW_EVENT_INTERVAL: Final = 60.0
NOTE_LIMIT: Final = 1024


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    def as_regarding(self) -> dict[str, str]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }


@dataclass(slots=True)  # one per pod evented in the last minutes
class _Series:
    namespace: str
    name: str  # the Event object's
    count: int  # occurrences observed
    written: int  # the count the API server holds
    last_observed: float
    created: dict[str, Any]  # the Event's create body, to create it again if it is gone


@dataclass(slots=True)  # one per pod evented in the last minutes
class _Allowance:
    """A pod's token bucket of new Events."""

    tokens: float
    updated: float


@dataclass
class EventRecorder:
    """Turns occurrences into the writes kube's recorder would make; sends nothing itself."""

    controller: str
    instance: str = field(default_factory=lambda: socket.gethostname())
    clock: Callable[[], float] = time.time
    finish_after: float = FINISH_AFTER
    burst: int = NEW_EVENTS_BURST
    per_pod_interval: float = NEW_EVENT_INTERVAL
    _series: dict[tuple[str, str, str, str], _Series] = field(default_factory=dict)
    _allowances: dict[str, _Allowance] = field(default_factory=dict)
    limited: int = 0  # new Events refused by the per-pod limit
    _finished: list[Request] = field(default_factory=list)  # final counts `record` left to write

    def record(
        self,
        pod: PodRef,
        event_type: str,
        reason: str,
        action: str,
        note: str,
        controller: str = "",
        related: PodRef | None = None,
    ) -> Request | None:
        """The write this occurrence needs now, or None: a repeat only counts, or the pod is over its
        allowance of new Events. `controller` is the reporting controller (the pod's scheduler
        name, as kube-scheduler's profiles report); the recorder's own by default. `related` is the
        other pod involved (the preemptor of a Preempted event). A series this occurrence finishes
        leaves its final count to `take_finished`."""
        reporter = controller or self.controller
        now = self.clock()
        key = (pod.uid, action, reason, reporter)
        series = self._series.get(key)
        if series is not None and now - series.last_observed <= self.finish_after:
            series.count += 1
            series.last_observed = now
            if series.written > 1:
                return None
            series.written = series.count
            return _patch_series(series, now)
        if series is not None:
            self._finished.extend(_final_count(self._series.pop(key)))
        if not self._allow(pod.uid, now):
            self.limited += 1
            return None
        name = f"{pod.name}.{time.time_ns():x}"
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": pod.namespace},
            "eventTime": _micro_time(now),
            "reportingController": reporter,
            "reportingInstance": f"{reporter}-{self.instance}"[:128],
            "action": action,
            "reason": reason,
            "type": event_type,
            "regarding": pod.as_regarding(),
            "note": note[:NOTE_LIMIT],
        }
        if related is not None:
            body["related"] = related.as_regarding()
        self._series[key] = _Series(pod.namespace, name, 1, 1, now, body)
        return _create(pod.namespace, body)

    def take_finished(self) -> list[Request]:
        """The final counts of the series `record` finished since the last call, to write."""
        finished, self._finished = self._finished, []
        return finished

    def refresh(self) -> list[Request]:
        """Patches for the series whose count grew since it was written (kube: every 30 minutes)."""
        writes = []
        for series in self._series.values():
            if series.count > series.written:
                series.written = series.count
                writes.append(_patch_series(series, series.last_observed))
        return writes

    def finish(self, *, everything: bool = False) -> list[Request]:
        """Finish the series idle for longer than `finish_after` (`everything`: all, at shutdown): the
        patches that write their final counts (client-go's finishSeries, every 6 minutes)."""
        now = self.clock()
        writes = []
        for key, series in list(self._series.items()):
            if everything or now - series.last_observed > self.finish_after:
                writes.extend(_final_count(self._series.pop(key)))
        for uid, allowance in list(self._allowances.items()):
            if now - allowance.updated > self.burst * self.per_pod_interval:
                del self._allowances[uid]  # a full bucket again: nothing to remember
        return writes

    def recreate(self, name: str) -> Request | None:
        """The create of Event `name`, count included, for a series patch that found it gone (client-go
        creates it again); None once its series is finished."""
        for series in self._series.values():
            if series.name == name:
                series.written = series.count
                lately = {"count": series.count, "lastObservedTime": _micro_time(series.last_observed)}
                return _create(series.namespace, {**series.created, "series": lately})
        return None

    def forget_event(self, uid: str, name: str) -> None:
        """An Event that was never written (its create was dropped): its series starts over."""
        for key in [key for key, series in self._series.items() if key[0] == uid and series.name == name]:
            del self._series[key]

    def forget(self, uid: str) -> list[Request]:
        """Finish a pod's series (it is bound or gone) and drop its allowance: the patches that write
        their final counts."""
        writes = []
        for key in [key for key in self._series if key[0] == uid]:
            writes.extend(_final_count(self._series.pop(key)))
        self._allowances.pop(uid, None)
        return writes

    def _allow(self, uid: str, now: float) -> bool:
        allowance = self._allowances.get(uid)
        if allowance is None:
            allowance = self._allowances[uid] = _Allowance(float(self.burst), now)
        allowance.tokens = min(
            float(self.burst), allowance.tokens + (now - allowance.updated) / self.per_pod_interval
        )
        allowance.updated = now
        if allowance.tokens < 1.0:
            return False
        allowance.tokens -= 1.0
        return True


def _create(namespace: str, body: dict[str, Any]) -> Request:
    return Request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body)


def _final_count(series: _Series) -> list[Request]:
    """The patch that writes a finished series' count, if the API server lacks it."""
    return [_patch_series(series, series.last_observed)] if series.count > series.written else []


def _patch_series(series: _Series, observed: float) -> Request:
    body: dict[str, Any] = {"series": {"count": series.count, "lastObservedTime": _micro_time(observed)}}
    path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}"
    return Request("PATCH", path, body, requests.MERGE_PATCH)


def _micro_time(moment: float) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{int(moment % 1 * 1e6):06d}Z"
