"""bench.refresh_micro runs end to end: a stand-in Prometheus answers for every node, and each refresh
is followed by a decision."""

from __future__ import annotations

from bench.refresh_micro import measure


def test_each_round_samples_every_node_and_decides_a_pod() -> None:
    rows = measure(nodes=30, rounds=2)

    assert [row["round"] for row in rows] == [0, 1]
    assert all(row["nodes_sampled"] == 30 for row in rows)
    assert all(row["loop_wait_max_ms"] >= row["loop_wait_p99_ms"] for row in rows)
    assert all(row["pods"] > 0 and row["pod_max_ms"] >= row["pod_p99_ms"] > 0 for row in rows)
