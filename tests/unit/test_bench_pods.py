"""The benchmark's pod shapes are valid pods whose placement rules concern the benchmark's own pods."""

from __future__ import annotations

import pytest
from bench.pods import SHAPES, pod_manifest

from promsched.scheduling.objects.pods import PodInfo


def shaped(shape: str) -> PodInfo:
    manifest = pod_manifest("bench", "p-0", "promsched", shape=shape)
    return PodInfo.from_object(manifest | {"status": {"phase": "Pending"}})


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_is_a_pod_promsched_schedules_whose_rules_select_its_siblings(shape: str) -> None:
    pod = shaped(shape)
    assert pod.unsupported == ()
    selectors = [constraint.selector for constraint in pod.spread_constraints]
    selectors += [term.selector for term in pod.pod_affinity.required_anti]
    selectors += [weighted.term.selector for weighted in pod.pod_affinity.preferred_anti]
    assert all(selector.matches(pod.labels) for selector in selectors)
    rules = bool(selectors) + bool(pod.host_ports)
    assert rules == (shape != "plain")
