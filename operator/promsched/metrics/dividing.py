"""A plugin query sent in two parts: what changes every scrape, asked every refresh, and a divisor that
changes rarely, asked again only when the one kept is too old or misses a node; the two are divided here
as Prometheus divided them.

Two shapes of query are split so:
- network's `traffic / on(node) group_left(unit) link speeds`: the speeds part (which devices have a
  speed, their sum) was about two thirds of the whole query's Prometheus CPU at 5000 nodes;
- memory's and diskSpace's used percent, `100 * max by (node) (1 - available / total)`: the totals
  (MemTotal, a filesystem's size) half of each query's (`python -m bench.query_cost`).

The divisors kept are used for at most staleAfter after they were asked, as any sample is, and are asked
again at once when the numerator names a node (or filesystem) they lack. A node whose NIC, memory or disk
changes keeps the old speed or size until then.

The result is the one the whole query gives: the same series, labels and values (the division is the
same IEEE one Prometheus makes, on the numbers its answers carry exactly). For the used percents, whose
parts take each node's least available and largest total, that holds wherever a node's series agree on
the total, as two node_exporter pods scraped at once during a rollout do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from promsched.metrics.offloading import paced
from promsched.metrics.samples import QueryResult, Series


@dataclass(frozen=True)
class SplitQuery:
    """`numerator / on(on) group_left(carried) divisor`, each part sent on its own; with
    `used_percent_by`, `100 * max by (used_percent_by) (1 - numerator / on(on) divisor)`. The divisor
    answers at most one series per `on` values, none of them 0."""

    numerator: str
    divisor: str
    on: tuple[str, ...]  # the labels the two sides match on
    carried: str | None = None  # the divisor's label the result takes
    used_percent_by: str | None = None  # the label each node's worst used percent is taken by


def used_percent_split(
    available: str, total: str, by: str, label: str, per: tuple[str, ...] = ()
) -> SplitQuery:
    """`100 * max by (by) (1 - available / (total > 0))` in two parts: each node's least available and
    largest total (and each `per` value's: a filesystem's device), matched on `label` (the node label
    `by` names in PromQL) and `per`."""
    group = ", ".join((by, *per))
    return SplitQuery(
        numerator=f"min by ({group}) ({available})",
        divisor=f"max by ({group}) ({total}) > 0",
        on=(label, *per),
        used_percent_by=label,
    )


@dataclass(frozen=True, slots=True)
class Divisors:
    """A divisor query's answer, by the value of the label the sides match on: each divisor and its
    carried label's value (None: absent); and when it was asked. Kept as plain tuples of atoms, which the
    garbage collector stops tracking, so the thousands kept across refreshes add nothing to its passes."""

    query: str
    by_key: Mapping[tuple[str, ...], tuple[float, str | None]]
    asked_at: float

    @classmethod
    def of(cls, result: QueryResult, split: SplitQuery, asked_at: float) -> Divisors:
        on, carried = split.on, split.carried
        answered = (*result.series, *result.non_finite)  # a NaN divisor gives a NaN to report, as in PromQL
        by_key = {
            _key(s, on): (s.value, None if carried is None else s.labels.get(carried))
            for s in paced(answered)
        }
        return cls(result.query, MappingProxyType(by_key), asked_at)

    def usable(self, split: SplitQuery, at: float, stale_after: float) -> bool:
        """Whether these may divide a numerator asked at `at`: the same divisor query, asked less than
        staleAfter before."""
        return self.query == split.divisor and at - self.asked_at < stale_after

    def cover(self, numerator: QueryResult, on: tuple[str, ...]) -> bool:
        """Whether every node (or filesystem) the numerator answers for has a divisor here."""
        by_key = self.by_key
        return all(_key(s, on) in by_key for s in (*numerator.series, *numerator.non_finite))


def _key(series: Series, on: tuple[str, ...]) -> tuple[str, ...]:
    labels = series.labels
    return tuple(labels.get(label, "") for label in on)


def divided(numerator: QueryResult, divisors: Divisors, split: SplitQuery, query: str) -> QueryResult:
    """What `query` (the whole of `split`) answers, from its parts' answers. A numerator series without
    a divisor is left out, as Prometheus's one-to-one match leaves it out; a non-finite value is listed
    apart, as the client lists it."""
    if split.used_percent_by is not None:
        series = _worst_used_percents(numerator, divisors, split.on, split.used_percent_by)
    else:
        series = _quotients(numerator, divisors, split.on, split.carried)
    finite = tuple(s for s in series if math.isfinite(s.value))
    non_finite = tuple(s for s in series if not math.isfinite(s.value))
    return QueryResult(query, finite, non_finite, numerator.warnings)


def _quotients(
    numerator: QueryResult, divisors: Divisors, on: tuple[str, ...], carried: str | None
) -> list[Series]:
    """`numerator / on(on) group_left(carried) divisor`."""
    quotients: list[Series] = []
    by_key = divisors.by_key
    for series in paced((*numerator.series, *numerator.non_finite)):
        divisor = by_key.get(_key(series, on))
        if divisor is None:
            continue
        divisor_value, carried_value = divisor
        labels = dict(series.labels)
        if carried is not None:
            if carried_value is None:  # group_left copies its absence too
                labels.pop(carried, None)
            else:
                labels[carried] = carried_value
        quotients.append(Series(labels, _quotient(series.value, divisor_value), series.timestamp))
    return quotients


def _worst_used_percents(
    numerator: QueryResult, divisors: Divisors, on: tuple[str, ...], by: str
) -> list[Series]:
    """`100 * max by (by) (1 - numerator / on(on) divisor)`: PromQL's max keeps a NaN only where every
    value is one."""
    worst: dict[str, tuple[float, float]] = {}  # by's value -> (1 - quotient, timestamp)
    by_key = divisors.by_key
    for series in paced((*numerator.series, *numerator.non_finite)):
        divisor = by_key.get(_key(series, on))
        if divisor is None:
            continue
        used = 1.0 - _quotient(series.value, divisor[0])
        node = series.labels.get(by, "")
        kept = worst.get(node)
        if kept is None or kept[0] < used or math.isnan(kept[0]):
            worst[node] = (used, series.timestamp)
    return [
        Series({by: node} if node else {}, 100.0 * used, timestamp)
        for node, (used, timestamp) in worst.items()
    ]


def _quotient(dividend: float, divisor: float) -> float:
    # IEEE's, as Prometheus's: Python raises on a zero divisor instead.
    if divisor != 0.0:
        return dividend / divisor
    if dividend == 0.0 or math.isnan(dividend):
        return math.nan
    return math.copysign(math.inf, dividend) * math.copysign(1.0, divisor)
