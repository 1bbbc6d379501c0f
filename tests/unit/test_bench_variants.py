"""The benchmark's policy (bench/variants.py): a Prometheus timeout that grows with the sandbox."""

from __future__ import annotations

import pytest
from bench.variants import policy_spec, query_timeout

from promsched.api.policies import parse_spec


@pytest.mark.parametrize(
    ("nodes", "timeout"), [(0, "5s"), (100, "5s"), (1000, "5s"), (1001, "10s"), (5000, "25s")]
)
def test_the_query_timeout_grows_with_the_node_count(nodes: int, timeout: str) -> None:
    assert query_timeout(nodes) == timeout


def test_the_benchmark_policy_with_a_grown_timeout_is_a_valid_spec() -> None:
    spec = parse_spec(policy_spec("http://127.0.0.1:9090", "15s", query_timeout(5000)))
    assert spec.prometheus.timeout_seconds == 25.0
