"""Go durations read by durationpy behind the CRD's pattern: errors keep naming the field."""

from __future__ import annotations

import pytest

from promsched.api.fields import parse_duration


@pytest.mark.parametrize(("text", "seconds"), [("1h2m3.5s", 3723.5), ("250us", 0.00025), ("90m", 5400.0)])
def test_go_durations_are_read_as_go_reads_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_a_duration_past_what_can_be_held_names_the_field() -> None:
    with pytest.raises(ValueError, match="too long") as raised:
        parse_duration("99999999999999999h", "rebalance.interval")
    assert str(raised.value) == (
        "rebalance.interval: '99999999999999999h' is too long a duration (at most 999999999 days)"
    )


@pytest.mark.parametrize("text", ["1d", "-5s", "1µs", "0"])
def test_what_durationpy_takes_beyond_the_crds_pattern_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="must be a Go duration"):
        parse_duration(text, "staleAfter")
