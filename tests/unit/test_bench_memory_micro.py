"""bench.memory_micro's workers part: pods waiting for a node go through Kopf's real watch path, and what
they hold is measured while Kopf's per-object workers live."""

from __future__ import annotations

from bench.memory_micro import measure_workers


def test_pending_pods_hold_a_kopf_worker_each_until_it_idles_out() -> None:
    pods = 40
    per_pod, tasks = measure_workers(pods, idle_timeout=60.0)
    assert per_pod > 0
    # Each pod's worker waits on its queue with a task of its own: two tasks a pod, a second later.
    assert tasks >= 2 * pods
