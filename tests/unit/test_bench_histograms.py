"""A histogram read off a /metrics page, as make bench reads promsched's event loop lag per run."""

from __future__ import annotations

from bench.histograms import added, histogram_quantile, scraped

PAGE = """# HELP promsched_event_loop_lag_seconds How late the event loop woke.
# TYPE promsched_event_loop_lag_seconds histogram
promsched_event_loop_lag_seconds_bucket{le="0.001"} 50.0
promsched_event_loop_lag_seconds_bucket{le="0.02"} 98.0
promsched_event_loop_lag_seconds_bucket{le="+Inf"} 100.0
promsched_event_loop_lag_seconds_count 100.0
promsched_event_loop_lag_seconds_sum 0.4
promsched_bind_duration_seconds_bucket{le="0.001",result="bound"} 7.0
promsched_bind_duration_seconds_bucket{result="error",le="0.001"} 1.0
promsched_bind_duration_seconds_bucket{le="+Inf",result="bound"} 9.0
promsched_bind_duration_seconds_bucket{result="error",le="+Inf"} 2.0
"""


def test_a_scraped_histogram_gives_its_buckets_in_order_with_every_series_summed() -> None:
    lag = scraped(PAGE, "promsched_event_loop_lag_seconds")
    assert lag == [(0.001, 50.0), (0.02, 98.0), (float("inf"), 100.0)]
    assert scraped(PAGE, "promsched_bind_duration_seconds") == [(0.001, 8.0), (float("inf"), 11.0)]
    assert scraped(PAGE, "promsched_missing_seconds") == []


def test_a_scraped_histogram_can_keep_the_series_of_some_labels_alone() -> None:
    assert scraped(PAGE, "promsched_bind_duration_seconds", {"result": "error"}) == [
        (0.001, 1.0),
        (float("inf"), 2.0),
    ]
    assert scraped(PAGE, "promsched_event_loop_lag_seconds", {"during_refresh": "true"}) == []


def test_the_runs_p99_is_of_the_observations_made_during_it() -> None:
    before = [(0.001, 40.0), (0.02, 40.0), (float("inf"), 40.0)]
    during = added(before, scraped(PAGE, "promsched_event_loop_lag_seconds"))
    assert during == [(0.001, 10.0), (0.02, 58.0), (float("inf"), 60.0)]
    # Rank 59.4 of 60 lies in (0.02, +Inf]: Prometheus answers the highest finite bound.
    assert histogram_quantile(0.99, during) == 0.02
    assert histogram_quantile(0.5, during) == 0.001 + (0.02 - 0.001) * (30 - 10) / (58 - 10)


def test_a_series_first_observed_during_the_run_counts_from_zero() -> None:
    after = scraped(PAGE, "promsched_event_loop_lag_seconds")
    assert added([], after) == after
    assert added([], []) == []
