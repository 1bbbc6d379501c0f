"""The decision annotation is written by the scheduler and read by `explain` through one codec."""

from __future__ import annotations

import json

import pytest

from promsched.api.annotations import AnnotationError, decode_decision, encode_decision
from promsched.api.statuses import NodeScore, PluginScore, UsageEstimate
from promsched.metrics.scoring import NodeResult, PluginResult


def test_what_the_scheduler_writes_explain_reads_back_rounded_and_without_raw_values() -> None:
    ranked = (
        NodeResult("idle", 91.234, (PluginResult("cpu", 8.0, 92.04), PluginResult("gpu", None, None)), ()),
        NodeResult("busy", 15.05, (PluginResult("cpu", 85.0, 15.0), PluginResult("gpu", None, None)), ()),
    )
    text = encode_decision("idle", ranked)
    assert json.loads(text) == {
        "node": "idle",
        "top": [
            {"node": "idle", "total": 91.2, "plugins": {"cpu": 92.0, "gpu": None}},
            {"node": "busy", "total": 15.1, "plugins": {"cpu": 15.0, "gpu": None}},
        ],
    }
    assert " " not in text  # compact: it is on every pod
    decoded = decode_decision(text)
    assert decoded.node == "idle"
    assert decoded.top_nodes[0] == NodeScore(
        node="idle", total=91.2, plugins=[PluginScore(name="cpu", score=92.0), PluginScore(name="gpu")]
    )
    # What the status holds encodes the same way.
    assert encode_decision("idle", decoded.top_nodes) == text


@pytest.mark.parametrize("text", ["", "[]", '{"node": "n"}', '{"node": "n", "top": [{"node": "n"}]}'])
def test_an_annotation_promsched_did_not_write_is_an_error_naming_it(text: str) -> None:
    with pytest.raises(AnnotationError, match=r"promsched.io/decision annotation cannot be read"):
        decode_decision(text)


def test_the_usage_estimate_travels_in_the_annotation() -> None:
    estimate = UsageEstimate(
        milli_cpu=420,
        memory=3 * 2**28,
        cpu_basis="p90 of 5 running siblings (ReplicaSet/web)",
        memory_basis="x",
    )
    text = encode_decision("idle", (), estimate)
    assert json.loads(text)["est"] == {"cpu": [420, estimate.cpu_basis], "memory": [3 * 2**28, "x"]}
    assert decode_decision(text).estimate == estimate
    assert decode_decision(encode_decision("idle", ())).estimate is None  # written before estimates
    with pytest.raises(AnnotationError):
        decode_decision('{"node": "n", "top": [], "est": {"cpu": [1]}}')
