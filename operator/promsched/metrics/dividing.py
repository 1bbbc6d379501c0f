"""A plugin query sent in two parts: what changes every scrape, asked every refresh, and a divisor that
changes rarely, asked again only when the one kept is too old or misses a node; the two are divided here
as Prometheus divided them (`numerator / on(label) group_left(carried) divisor`).

The network plugin's traffic and its link speeds are the case: the speeds part (which devices have a
speed, their sum) was about two thirds of the whole query's Prometheus CPU at 5000 nodes
(`python -m bench.query_cost`), for values that change when a NIC does. The divisors kept are used for at
most staleAfter after they were asked, as any sample is, and are asked again at once when the numerator
names a node they lack (a node that joined). A node whose NIC changes keeps its old speed until then.

The result is the one the whole query gives: the same series, labels and values (the division is the
same IEEE one Prometheus makes, on the numbers its answers carry exactly).
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
    """`numerator / on(on) group_left(carried) divisor`, each part sent on its own. The divisor answers
    at most one series per `on` value, none of them 0."""

    numerator: str
    divisor: str
    on: str  # the label the two sides match on
    carried: str  # the divisor's label the result takes


@dataclass(frozen=True, slots=True)
class Divisors:
    """A divisor query's answer, by the value of the label the sides match on: each divisor and its
    carried label's value (None: absent); and when it was asked. Kept as plain tuples of atoms, which the
    garbage collector stops tracking, so the thousands kept across refreshes add nothing to its passes."""

    query: str
    by_key: Mapping[str, tuple[float, str | None]]
    asked_at: float

    @classmethod
    def of(cls, result: QueryResult, split: SplitQuery, asked_at: float) -> Divisors:
        on, carried = split.on, split.carried
        answered = (*result.series, *result.non_finite)  # a NaN divisor gives a NaN to report, as in PromQL
        by_key = {s.labels.get(on, ""): (s.value, s.labels.get(carried)) for s in paced(answered)}
        return cls(result.query, MappingProxyType(by_key), asked_at)

    def usable(self, split: SplitQuery, at: float, stale_after: float) -> bool:
        """Whether these may divide a numerator asked at `at`: the same divisor query, asked less than
        staleAfter before."""
        return self.query == split.divisor and at - self.asked_at < stale_after

    def cover(self, numerator: QueryResult, on: str) -> bool:
        """Whether every node the numerator answers for has a divisor here."""
        by_key = self.by_key
        return all(s.labels.get(on, "") in by_key for s in (*numerator.series, *numerator.non_finite))


def divided(numerator: QueryResult, divisors: Divisors, split: SplitQuery, query: str) -> QueryResult:
    """What `query` (the whole of `split`) answers, from its parts' answers. A numerator series without
    a divisor is left out, as Prometheus's one-to-one match leaves it out; a non-finite quotient is
    listed apart, as the client lists it."""
    finite: list[Series] = []
    non_finite: list[Series] = []
    by_key, on, carried = divisors.by_key, split.on, split.carried
    for series in paced((*numerator.series, *numerator.non_finite)):
        divisor = by_key.get(series.labels.get(on, ""))
        if divisor is None:
            continue
        divisor_value, carried_value = divisor
        labels = dict(series.labels)
        if carried_value is None:  # group_left copies its absence too
            labels.pop(carried, None)
        else:
            labels[carried] = carried_value
        value = _quotient(series.value, divisor_value)
        (finite if math.isfinite(value) else non_finite).append(Series(labels, value, series.timestamp))
    return QueryResult(query, tuple(finite), tuple(non_finite), numerator.warnings)


def _quotient(dividend: float, divisor: float) -> float:
    # IEEE's, as Prometheus's: Python raises on a zero divisor instead.
    if divisor != 0.0:
        return dividend / divisor
    if dividend == 0.0 or math.isnan(dividend):
        return math.nan
    return math.copysign(math.inf, dividend) * math.copysign(1.0, divisor)
