from promsched.sandbox.control_plane.sizing import (
    lease_seconds,
    node_monitor_grace_seconds,
    node_startup_grace_seconds,
    ready_deadline_seconds,
    ready_poll_seconds,
)

SIZES = (1, 6, 100, 1000, 2000, 5000, 10000)


def test_small_sandboxes_keep_kwoks_lease_and_the_controller_managers_defaults() -> None:
    for nodes in (1, 6, 100):
        assert lease_seconds(nodes) == 40
        assert node_monitor_grace_seconds(nodes) == 50
        assert node_startup_grace_seconds(nodes) == 60
        assert ready_poll_seconds(nodes) == 0.5


def test_lease_renewals_stay_within_100_per_second() -> None:
    assert lease_seconds(1000) == 40
    assert lease_seconds(5000) == 200
    for nodes in SIZES:
        # kwok renews each lease every quarter of its duration.
        assert nodes / (lease_seconds(nodes) / 4) <= 100


def test_a_lease_renewed_late_by_a_slow_kwok_never_looks_stale() -> None:
    for nodes in SIZES:
        grace = node_monitor_grace_seconds(nodes)
        # The renewal interval plus a whole round of every node's lease at 10 renewals/s.
        assert grace >= lease_seconds(nodes) / 4 + nodes / 10
        assert node_startup_grace_seconds(nodes) >= grace
    assert node_monitor_grace_seconds(5000) == 700


def test_large_sandboxes_are_polled_less_often_and_given_longer() -> None:
    assert ready_poll_seconds(5000) == 5.0
    assert ready_deadline_seconds(5000) > ready_deadline_seconds(1000) > ready_deadline_seconds(6) >= 60
    for nodes in SIZES:
        assert ready_poll_seconds(nodes) < ready_deadline_seconds(nodes) / 20
