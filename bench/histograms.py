"""Histograms as a /metrics page or prometheus_client gives them: cumulative counts per bucket, and their
quantiles as Prometheus's histogram_quantile works them out."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from bench.requestcounts import samples

# Buckets: (upper bound, observations at or below it), ascending, the last +Inf: a histogram's as read.
Buckets = list[tuple[float, float]]


def added(before: Buckets, after: Buckets) -> Buckets:
    """The observations made between two readings of one histogram, per bucket (still cumulative). One
    not there at the first (a labelled series appears with its first observation) counts from zero."""
    before = before or [(upper, 0.0) for upper, _ in after]
    return [(upper, count - earlier) for (upper, count), (_, earlier) in zip(after, before, strict=True)]


def summed(readings: Sequence[Buckets]) -> Buckets:
    """Several rounds' observations as one histogram."""
    return [(bucket[0][0], sum(count for _, count in bucket)) for bucket in zip(*readings, strict=True)]


def bucketed(values: Sequence[float], bounds: Sequence[float]) -> Buckets:
    """`values` as a histogram with upper bounds `bounds` (ascending, the last +Inf) would count them."""
    return [(upper, float(sum(value <= upper for value in values))) for upper in bounds]


def histogram_quantile(q: float, buckets: Buckets) -> float:
    """The q-quantile of a histogram's buckets as Prometheus's histogram_quantile gives it: linear
    within the bucket the rank falls in (from 0 for the first); the highest finite bound if it falls in
    +Inf; NaN without observations."""
    total = buckets[-1][1]
    if total == 0:
        return math.nan
    rank = q * total
    index = next(index for index, (_, count) in enumerate(buckets) if count >= rank)
    if index == len(buckets) - 1:
        return buckets[-2][0]
    lower, below = buckets[index - 1] if index > 0 else (0.0, 0.0)
    upper, count = buckets[index]
    return lower + (upper - lower) * (rank - below) / (count - below)


def scraped(text: str, metric: str, where: Mapping[str, str] | None = None) -> Buckets:
    """`metric`'s cumulative bucket counts on a /metrics page (empty when it has none), every series
    (with the labels of `where`, if given) summed per bound."""
    counts: dict[float, float] = {}
    for labels, value in samples(text, f"{metric}_bucket"):
        if where and any(labels.get(name) != wanted for name, wanted in where.items()):
            continue
        bound = float(labels["le"])
        counts[bound] = counts.get(bound, 0.0) + value
    return sorted(counts.items())
