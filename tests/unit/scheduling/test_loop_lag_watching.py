"""The event loop's lag: how much later than asked a task woke, recorded each time it wakes."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from promsched.scheduling.loop_lag_watching import Refreshes, watch_loop_lag
from support.clocks import Clock


def lag_count(le: str, during_refresh: str = "false") -> float:
    labels = {"le": le, "during_refresh": during_refresh}
    return REGISTRY.get_sample_value("promsched_event_loop_lag_seconds_bucket", labels) or 0.0


class Stop(Exception):
    pass


async def test_each_wake_records_how_late_it_came() -> None:
    clock = Clock(100.0)
    late_by = [0.0, 0.03, 0.4]

    async def sleep(seconds: float) -> None:
        if not late_by:
            raise Stop
        clock.advance(seconds + late_by.pop(0))  # the loop ran something else for this much longer

    on_time, within_50ms, within_half_second = lag_count("0.001"), lag_count("0.05"), lag_count("0.5")
    with pytest.raises(Stop):
        await watch_loop_lag(interval=0.1, clock=clock, sleep=sleep)
    assert lag_count("0.001") - on_time == 1
    assert lag_count("0.05") - within_50ms == 2
    assert lag_count("0.5") - within_half_second == 3


async def test_the_lags_go_where_the_caller_says() -> None:
    clock = Clock(5.0)
    late_by = [0.02, 0.0]
    observed: list[float] = []

    async def sleep(seconds: float) -> None:
        if not late_by:
            raise Stop
        clock.advance(seconds + late_by.pop(0))

    on_time = lag_count("0.001")
    with pytest.raises(Stop):
        await watch_loop_lag(
            interval=0.1, clock=clock, sleep=sleep, observe=lambda lag, _during: observed.append(lag)
        )
    assert observed == pytest.approx([0.02, 0.0])
    assert lag_count("0.001") == on_time  # not into the operator's histogram as well


async def test_a_lag_counts_as_during_a_refresh_when_one_ran_at_any_time_while_it_was_awaited() -> None:
    clock = Clock(0.0)
    refreshes = Refreshes()
    # What happens to the refreshes while each wait lasts: none; one starts; it ends; another starts
    # and ends within one wait; none again.
    meanwhile = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 0)]
    observed: list[bool] = []

    async def sleep(seconds: float) -> None:
        if not meanwhile:
            raise Stop
        started, finished = meanwhile.pop(0)
        refreshes.started += started
        refreshes.finished += finished
        clock.advance(seconds)

    with pytest.raises(Stop):
        await watch_loop_lag(
            refreshes=refreshes,
            clock=clock,
            sleep=sleep,
            observe=lambda _lag, during: observed.append(during),
        )
    assert observed == [False, True, True, True, False]
