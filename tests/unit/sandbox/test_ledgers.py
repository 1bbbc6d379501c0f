import logging
from typing import Any

import pytest

from promsched.sandbox.node_metrics.counters import NodeCounters
from promsched.sandbox.node_metrics.ledgers import PodLedger
from promsched.sandbox.node_metrics.profiles import LoadProfile
from promsched.sandbox.node_metrics.usages import ANNOTATION, PodUsage
from support.objects import pod_object


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def ledger(*names: str) -> tuple[PodLedger, dict[str, NodeCounters], Clock]:
    clock = Clock()
    nodes = {name: NodeCounters(LoadProfile(cpu=0), 0.0) for name in names}
    return PodLedger(nodes, clock), nodes, clock


def running(name: str, node: str, usage: str = "cpu=1", **options: Any) -> dict[str, Any]:
    return pod_object(name, node_name=node, annotations={ANNOTATION: usage}, **options)


def test_a_pod_counts_while_it_runs_on_a_sandbox_node() -> None:
    pods, nodes, clock = ledger("n1")
    pending = pod_object("p", annotations={ANNOTATION: "cpu=1"}, nodeName="n1")
    pods.observe(pending)
    assert not nodes["n1"].pods
    pods.observe(running("p", "n1"))
    assert nodes["n1"].pod_usage.milli_cpu == 1000
    clock.now = 10.0
    done = running("p", "n1")
    done["status"]["phase"] = "Succeeded"
    pods.observe(done)
    assert not nodes["n1"].pods
    assert nodes["n1"].updated_at == 10.0
    assert nodes["n1"].idle == pytest.approx(10.0 * 0.75)


def test_a_pod_stops_counting_when_its_deletion_starts_or_it_is_deleted() -> None:
    pods, nodes, _clock = ledger("n1")
    pods.observe(running("a", "n1"))
    pods.observe(running("b", "n1"))
    pods.observe(running("a", "n1", deleting=True))
    pods.forget(running("b", "n1"))
    assert not nodes["n1"].pods
    assert not pods.running


def test_pods_on_nodes_outside_the_sandbox_are_left_out() -> None:
    pods, _nodes, _clock = ledger("n1")
    pods.observe(running("p", "elsewhere"))
    assert not pods.running


def test_a_relist_drops_the_pods_it_no_longer_holds() -> None:
    pods, nodes, _clock = ledger("n1", "n2")
    pods.observe(running("gone", "n1"))
    pods.observe(running("kept", "n2", "cpu=2"))
    pods.observe(running("kept", "n2", "cpu=2"))
    pods.observe(running("new", "n1", "memory=1Gi"))
    pods.retain({"uid-kept", "uid-new"})
    assert nodes["n1"].pod_usage == PodUsage(milli_cpu=50, memory=1024**3)
    assert nodes["n2"].pod_usage.milli_cpu == 2000
    assert set(pods.running) == {"uid-kept", "uid-new"}


def test_an_unchanged_pod_keeps_its_counters_and_a_changed_annotation_takes_effect() -> None:
    pods, nodes, clock = ledger("n1")
    pods.observe(running("p", "n1", "cpu=1"))
    counters = nodes["n1"].pods["uid-p"]
    clock.now = 5.0
    pods.observe(running("p", "n1", "cpu=1", version="2"))
    assert nodes["n1"].pods["uid-p"] is counters
    pods.observe(running("p", "n1", "cpu=3", version="3"))
    assert nodes["n1"].pod_usage.milli_cpu == 3000


def test_a_bad_annotation_is_logged_and_the_default_share_used(caplog: pytest.LogCaptureFixture) -> None:
    pods, nodes, _clock = ledger("n1")
    with caplog.at_level(logging.WARNING):
        pods.observe(running("p", "n1", "cpu=lots", cpu="2"))
    assert nodes["n1"].pod_usage.milli_cpu == 1000
    assert "pod ns/p: sandbox.promsched.io/usage: cpu='lots' is not a Kubernetes quantity" in caplog.text
    assert "using the default share of its requests" in caplog.text
