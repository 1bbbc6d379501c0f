"""The benchmark's policy (bench/variants.py): a Prometheus timeout that grows with the sandbox, and the
rules variant's sources."""

from __future__ import annotations

import pytest
from bench.variants import VARIANTS, policy_spec, query_timeout

from promsched.api.policies import NodeIdentitySource, parse_spec


@pytest.mark.parametrize(
    ("nodes", "timeout"), [(0, "5s"), (100, "5s"), (1000, "5s"), (1001, "10s"), (5000, "25s")]
)
def test_the_query_timeout_grows_with_the_node_count(nodes: int, timeout: str) -> None:
    assert query_timeout(nodes) == timeout


def test_the_benchmark_policy_with_a_grown_timeout_is_a_valid_spec() -> None:
    spec = parse_spec(policy_spec("http://127.0.0.1:9090", "15s", query_timeout(5000)))
    assert spec.prometheus.timeout_seconds == 25.0


def test_the_rules_variant_reads_every_node_mixin_rule_by_node_name() -> None:
    """promsched-rules measures the same plugins read from the recorded series, which the sandbox labels
    with the node's name; diskSpace, which has no rule, stays on node_exporter's series."""
    variant = next(variant for variant in VARIANTS if variant.key == "promsched-rules")
    spec = parse_spec(policy_spec("http://127.0.0.1:9090", "15s", variant=variant))
    assert spec.scheduler_name == variant.scheduler_name
    assert spec.node_identity.source == NodeIdentitySource.LABEL
    assert spec.node_identity.label == "instance"
    reading_rules = {plugin.name for plugin in spec.plugins if plugin.reads_recording_rules}
    assert reading_rules == {"cpu", "memory", "diskIO", "network"}
    plain = parse_spec(policy_spec("http://127.0.0.1:9090", "15s"))
    assert not any(plugin.reads_recording_rules for plugin in plain.plugins)
    assert [p.name for p in spec.plugins] == [p.name for p in plain.plugins]
