"""bench.refresh_micro runs end to end: a stand-in Prometheus answers for every node, and each refresh
is followed by a decision; the loop-lag histogram's quantile is worked out as Prometheus would."""

from __future__ import annotations

import math

import pytest
from bench.histograms import added, bucketed, histogram_quantile, summed
from bench.refresh_micro import measure


def test_each_round_samples_every_node_and_decides_a_pod() -> None:
    rows = measure(nodes=30, rounds=2, watchers=4)

    assert [row["round"] for row in rows] == [0, 1]
    assert all(row["nodes_sampled"] == 30 for row in rows)
    assert all(row["loop_wait_max_ms"] >= row["loop_wait_p99_ms"] for row in rows)
    assert all(row["pods"] > 0 and row["pod_max_ms"] >= row["pod_p99_ms"] > 0 for row in rows)
    # The operator's watcher ran beside the refresh, into its histogram.
    assert all(row["lag_observations"] > 0 for row in rows)
    assert all(row["lag_buckets"][-1][1] == row["lag_observations"] for row in rows)
    # Those made until the refresh returned are some of them.
    assert all(row["lag_refresh_buckets"][-1][1] <= row["lag_observations"] for row in rows)


BOUNDS = (0.001, 0.005, 0.02, 0.05, math.inf)


def buckets(*counts: float) -> list[tuple[float, float]]:
    return list(zip(BOUNDS, counts, strict=True))


def test_a_reading_less_the_one_before_is_what_was_observed_between() -> None:
    before, after = buckets(1, 2, 3, 3, 3), buckets(4, 6, 9, 9, 10)

    assert added(before, after) == buckets(3, 4, 6, 6, 7)


def test_values_are_counted_in_every_bucket_whose_bound_they_reach() -> None:
    assert bucketed([0.001, 0.003, 0.03, 7.0], BOUNDS) == buckets(1, 2, 2, 3, 4)


def test_rounds_add_up_bucket_by_bucket() -> None:
    assert summed([buckets(1, 1, 2, 2, 2), buckets(0, 3, 3, 4, 4)]) == buckets(1, 4, 5, 6, 6)


def test_the_quantile_interpolates_within_its_bucket_as_prometheus_does() -> None:
    # 100 observations, 98 at most 5 ms, 2 in (5, 20] ms: the 99th falls halfway into (5, 20].
    assert histogram_quantile(0.99, buckets(50, 98, 100, 100, 100)) == pytest.approx(0.0125)
    # In the first bucket, from 0.
    assert histogram_quantile(0.5, buckets(10, 10, 10, 10, 10)) == pytest.approx(0.0005)


def test_a_quantile_in_the_infinite_bucket_is_the_highest_finite_bound() -> None:
    assert histogram_quantile(0.99, buckets(0, 0, 0, 90, 100)) == 0.05


def test_no_observations_have_no_quantile() -> None:
    assert math.isnan(histogram_quantile(0.99, buckets(0, 0, 0, 0, 0)))
