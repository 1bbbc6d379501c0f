"""Trimaran, built from the pinned scheduler-plugins module, schedules on a sandbox from its Prometheus.

A sandbox of its own with a known skew: node CPU 32%, 5%, 10%, 60% and 38% of 4 cores, memory low and
even, so the CPU decides. The pod requests 200m (5% of a node) without a limit; the sample configuration
predicts it at its request (multiplier 1). TargetLoadPacking (target 40%) scores a node whose predicted
CPU p is at most 40 as 40 + 60p/40, and above it 40(100 - p)/60: node-0 (37%) scores 95.5, node-2 (15%)
62.5, node-1 (10%) 55, node-4 (43%, pushed past the target by the pod although nearest it before) 38,
node-3 (65%) 23. No node is predicted at the target itself, where the score drops from 100 to 40: the
rule's rate is exact only to a few parts per million. LoadVariationRiskBalancing scores
100(1 - (mu + sigma)/2) with mu the predicted share of allocatable CPU and sigma ~0 for steady loads:
node-1 scores 95, highest. Both choices differ from each other and from a spread by requests (no node
has pods), so a plugin that did not read the metrics could not pass.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import yaml

from promsched.sandbox import launching
from promsched.sandbox.control_plane.clusters import Sandbox
from promsched.sandbox.peers import SCHEDULER_NAMES, TrimaranPlugin, start_trimaran
from support.clusters import pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.integration

NODE_CPU = {"node-0": 32, "node-1": 5, "node-2": 10, "node-3": 60, "node-4": 38}
PROFILES = {
    "default": {"cpu": 5, "memory": 5, "diskBusy": 5, "diskUsed": 20},
    "nodes": {node: {"cpu": cpu} for node, cpu in NODE_CPU.items()},
}
# rate() over 5 minutes in the CPU rule needs that much history from the start.
HISTORY_SECONDS = 6 * 60.0
EXPECTED_NODE: dict[TrimaranPlugin, str] = {
    "TargetLoadPacking": "node-0",
    "LoadVariationRiskBalancing": "node-1",
}


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    directory = tmp_path_factory.mktemp("trimaran")
    profiles = directory / "profiles.yaml"
    profiles.write_text(yaml.safe_dump(PROFILES))
    started = launching.up(
        directory / "sandbox", nodes=len(NODE_CPU), profiles_file=profiles, history=HISTORY_SECONDS
    )
    try:
        yield started
    finally:
        launching.down(directory / "sandbox")


@pytest.mark.parametrize("plugin", list(EXPECTED_NODE))
def test_trimaran_places_by_the_metrics_it_reads_from_prometheus(
    skewed: Sandbox, plugin: TrimaranPlugin
) -> None:
    namespace = f"trimaran-{uuid.uuid4().hex[:6]}"
    skewed.kubectl("create", "namespace", namespace)
    trimaran = start_trimaran(skewed, plugin)
    try:
        pod = pod_manifest("probe", namespace, SCHEDULER_NAMES[plugin], cpu="200m", image="app")
        skewed.kubectl("create", "-f", "-", input=json.dumps(pod))
        node = eventually(
            lambda: (
                skewed.kubectl(
                    "get", "pod", "probe", "-n", namespace, "-o", "jsonpath={.spec.nodeName}"
                ).stdout
            ),
            bool,
            timeout=120,
            what=f"the pod bound by {trimaran.scheduler_name}",
        )
        assert trimaran.metrics_failures() == []
        assert trimaran.nodes_scored_from_metrics() == set(skewed.node_names), trimaran.log_text()[-3000:]
        assert node == EXPECTED_NODE[plugin], trimaran.log_text()[-3000:]
    finally:
        trimaran.stop()
        skewed.kubectl("delete", "namespace", namespace, "--wait=false")
