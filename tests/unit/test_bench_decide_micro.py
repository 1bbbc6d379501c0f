"""bench.decide_micro's own parts: its shapes beside bench.pods', and the bound pods' Running updates."""

from __future__ import annotations

from bench import decide_micro

from promsched.sandbox.launching import ZONE_LABEL


def test_pods_with_required_affinity_to_their_zone_are_placed_in_one_zone() -> None:
    chosen: list[str] = []
    decide_micro.burst(6, 4, chosen, shape="affinity-required")()

    cache, _ = decide_micro.build(6)
    assert len(chosen) == 4
    assert len({cache.nodes[name].labels[ZONE_LABEL] for name in chosen}) == 1


def test_the_bound_pods_running_updates_are_timed() -> None:
    assert decide_micro.bound_updates(3, 5)() >= 0
