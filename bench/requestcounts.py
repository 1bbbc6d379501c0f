"""The API server's own count of the requests it served (`apiserver_request_total`), read from its
/metrics: parsed into counts by verb and resource, differenced between two readings, turned into rates.

Which client made a request is not a label of that metric; writes are told apart by what they write
(pods/status, pods/binding and events are what a pending pod costs its scheduler) and by a baseline
of the same counters read while no scheduler runs.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

METRIC = "apiserver_request_total"
# Seconds spent serving each kind of request so far (the histogram's sum; watches are not in it).
SECONDS_METRIC = "apiserver_request_duration_seconds_sum"
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"})
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, order=True)
class RequestKey:
    verb: str
    group: str  # "" for the core API
    resource: str
    subresource: str = ""

    @property
    def label(self) -> str:
        """`PATCH pods/status`, `POST events.events.k8s.io`: the resource as kubectl spells it."""
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{self.verb} {resource}/{self.subresource}" if self.subresource else f"{self.verb} {resource}"

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS

    @property
    def is_scheduling(self) -> bool:
        """A write a scheduler makes for a pod it places or fails to place: the binding, the pod's
        PodScheduled condition, and the events (core and events.k8s.io)."""
        if not self.is_write:
            return False
        if self.resource == "pods":
            return self.subresource in ("binding", "status")
        return self.resource == "events"


Counts = dict[RequestKey, float]

BINDING = RequestKey("POST", "", "pods", "binding")


@dataclass(frozen=True)
class Reading:
    """One reading of the API server's request counters: how many of each request it served so far,
    and the seconds it spent serving them (from its receiving a request to its writing the answer)."""

    totals: Counts
    seconds: Counts


def samples(text: str, metric: str) -> Iterator[tuple[dict[str, str], float]]:
    """(labels, value) of each sample of `metric` (with labels) in a Prometheus text exposition."""
    prefix = metric + "{"
    for line in text.splitlines():
        if line.startswith(prefix):
            labels_text, _, rest = line[len(prefix) :].rpartition("}")
            labels = {name: raw.replace('\\"', '"') for name, raw in _LABEL.findall(labels_text)}
            yield labels, float(rest.split()[0])


def by_label(text: str, metric: str, label: str) -> dict[str, float]:
    """`metric`'s samples summed by one label, e.g. promsched_api_writes_dropped_total by kind."""
    sums: dict[str, float] = {}
    for labels, value in samples(text, metric):
        sums[labels.get(label, "")] = sums.get(labels.get(label, ""), 0.0) + value
    return sums


def parse_request_totals(text: str) -> Counts:
    """`apiserver_request_total` of a /metrics text, summed over the labels other than verb, group,
    resource and subresource (code, component, scope, version, dry_run)."""
    return _by_request(text, METRIC)


def parse_reading(text: str) -> Reading:
    return Reading(_by_request(text, METRIC), _by_request(text, SECONDS_METRIC))


def mean_ms(
    seconds: Mapping[RequestKey, float], counts: Mapping[RequestKey, float], key: RequestKey
) -> float:
    """The mean time the API server took to serve one `key` request, in milliseconds (NaN for none)."""
    count = counts.get(key, 0.0)
    return 1000.0 * seconds.get(key, 0.0) / count if count else math.nan


def _by_request(text: str, metric: str) -> Counts:
    counts: Counts = {}
    for labels, value in samples(text, metric):
        key = RequestKey(
            labels.get("verb", ""),
            labels.get("group", ""),
            labels.get("resource", ""),
            labels.get("subresource", ""),
        )
        counts[key] = counts.get(key, 0.0) + value
    return counts


def difference(before: Mapping[RequestKey, float], after: Mapping[RequestKey, float]) -> Counts:
    """What each counter grew by between two readings; keys that did not grow are left out."""
    grown = {key: value - before.get(key, 0.0) for key, value in after.items()}
    return {key: value for key, value in grown.items() if value > 0}


def event_writes(counts: Mapping[RequestKey, float]) -> float:
    """Events created or patched (core and events.k8s.io)."""
    return sum(value for key, value in counts.items() if key.is_write and key.resource == "events")


def writes(counts: Mapping[RequestKey, float]) -> Counts:
    return {key: value for key, value in counts.items() if key.is_write}


def total(counts: Mapping[RequestKey, float], keys: Iterable[RequestKey] | None = None) -> float:
    return sum(counts.values()) if keys is None else sum(counts.get(key, 0.0) for key in keys)


def scheduling_total(counts: Mapping[RequestKey, float]) -> float:
    return sum(value for key, value in counts.items() if key.is_scheduling)


def per_minute(counts: Mapping[RequestKey, float], seconds: float) -> Counts:
    return {key: 60.0 * value / seconds for key, value in counts.items()} if seconds > 0 else {}


def net_of_baseline(
    rates: Mapping[RequestKey, float],
    baseline: Mapping[RequestKey, float],
    excluded: Iterable[RequestKey] = (),
) -> float:
    """Writes per minute above the baseline's (the other clients': kwok's heartbeats, the controllers'),
    leaving out `excluded` keys (the benchmark's own writes). A key below its baseline counts 0."""
    left_out = set(excluded)
    return sum(
        max(0.0, rate - baseline.get(key, 0.0))
        for key, rate in rates.items()
        if key.is_write and key not in left_out
    )


def rate_series(samples: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(time, cumulative count) readings -> (midpoint time, per minute) between consecutive readings."""
    series = []
    for (t0, c0), (t1, c1) in itertools.pairwise(samples):
        if t1 > t0:
            series.append(((t0 + t1) / 2, 60.0 * (c1 - c0) / (t1 - t0)))
    return series


def regarded(events: Iterable[Mapping[str, Any]], reason: str) -> set[str]:
    """The names of the objects that core/v1 Events of `reason` are about (their involvedObject)."""
    return {
        str((event.get("involvedObject") or {}).get("name", ""))
        for event in events
        if event.get("reason") == reason
    }


def event_occurrences(events: Iterable[Mapping[str, Any]]) -> int:
    """How many occurrences a list of core/v1 Events stands for: an aggregated event counts its series'
    count (events.k8s.io) or its count (core); one with neither counts once."""
    occurrences = 0
    for event in events:
        series = event.get("series") or {}
        occurrences += max(int(series.get("count") or 0), int(event.get("count") or 0), 1)
    return occurrences
