"""`promsched status`: one screen per policy from its status, checked as text and as a document."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from promsched.api.policies import SchedulingPolicy
from promsched.operating import listing, summaries
from promsched.operating.inspections import InspectError
from promsched.operating.summaries import policies_status, render_status
from support import policies
from support.fake_apis import FakeSender

READY = {
    "type": "Ready",
    "status": "False",
    "reason": "PrometheusUnreachable",
    "message": "GET http://prometheus:9090: connection refused",
    "lastTransitionTime": "2030-01-01T10:00:00Z",
}


def decision(pod: str, node: str | None, second: int, **fields: Any) -> dict[str, Any]:
    return {
        "pod": pod,
        "time": f"2030-01-01T10:00:{second:02d}Z",
        "latencyMs": 12.4,
        "generation": 2,
        "mode": "Enforce",
        **({"node": node} if node else {}),
        **fields,
    }


STATUS = {
    "observedGeneration": 2,
    "conditions": [READY],
    "scheduled": 7,
    "unschedulable": 2,
    "unschedulableNow": 1,
    "recentDecisions": [
        decision("shop/web-0", "node-1", 1),
        decision("shop/big", None, 2, filtered=[{"reason": "Insufficient cpu", "count": 5}]),
        decision("shop/web-1", "node-2", 3),
    ],
    "rebalance": {
        "mode": "DryRun",
        "lastCycle": "2030-01-01T10:01:00Z",
        "hotNodeCount": 1,
        "hotNodes": [{"node": "node-1", "plugin": "cpu", "value": 93.0}],
        "moves": [{"pod": "shop/web-0", "node": "node-1", "destination": "node-3", "reason": "cpu 93 > 85"}],
    },
}


def policy(status: dict[str, Any] | None = STATUS, **spec: Any) -> SchedulingPolicy:
    document = policies.policy_object("web", policies.spec_document(**spec), generation=2, status=status)
    if status is None:
        del document["status"]  # as the API server returns a policy the operator has not written to
    return SchedulingPolicy.from_object(document)


def test_a_policy_screen_says_mode_readiness_decisions_unschedulable_pods_and_rebalance() -> None:
    rebalancing = {
        "mode": "DryRun",
        "thresholds": [{"plugin": "cpu", "hotThreshold": 85, "targetThreshold": 70}],
    }
    assert render_status(policy(rebalance=rebalancing)).splitlines() == [
        "policy     web (schedulerName promsched, generation 2)",
        "mode       Enforce",
        "ready      False (PrometheusUnreachable): GET http://prometheus:9090: connection refused",
        "pods       7 scheduled, 2 unschedulable (1 waiting now), 0 errors",
        "rebalance  DryRun cycle at 2030-01-01T10:01:00Z: 1 hot node(s) (node-1), 1 move(s), 0 kept, "
        "0 eviction(s) since the operator started",
        "",
        "Last decisions (3 of the 3 the status keeps):",
        "  TIME                  POD         NODE           LATENCY",
        "  2030-01-01T10:00:03Z  shop/web-1  node-2         12 ms",
        "  2030-01-01T10:00:02Z  shop/big    (none fitted)  12 ms",
        "  2030-01-01T10:00:01Z  shop/web-0  node-1         12 ms",
        "",
        "Unschedulable (the latest decision that found no node, per pod):",
        "  shop/big  Insufficient cpu (5)",
        "",
        "Rebalance, latest cycle:",
        "  shop/web-0  would move off node-1 to node-3  cpu 93 > 85",
    ]


def test_a_policy_the_operator_has_not_seen_says_so() -> None:
    assert render_status(policy(status=None)).splitlines()[-1] == (
        "ready   unknown: no status yet; check that the operator runs"
    )
    stale = render_status(policy(status={"observedGeneration": 1}))
    assert "observed   generation 1: the operator is behind the spec" in stale.splitlines()
    assert "rebalance  Off" in stale.splitlines()


def test_only_the_last_decisions_are_shown_unless_wide() -> None:
    many = {"recentDecisions": [decision(f"shop/web-{n}", "node-1", n) for n in range(8)]}
    assert "Last decisions (5 of the 8 the status keeps):" in render_status(policy(many))
    assert "Last decisions (8 of the 8 the status keeps):" in render_status(policy(many), wide=True)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    other = policies.policy_object("batch", policies.spec_document(schedulerName="batch"))
    web = policies.policy_object("web", policies.spec_document(), generation=2, status=STATUS)
    api = FakeSender({listing.POLICIES_PATH: {"items": [web, other]}}, strict=True)

    @contextlib.asynccontextmanager
    async def connected(_kubeconfig: Path | None, _context: str | None = None) -> AsyncIterator[FakeSender]:
        yield api

    monkeypatch.setattr(summaries, "connected", connected)


@pytest.mark.usefixtures("cluster")
async def test_status_shows_every_policy_or_those_named_and_documents_them() -> None:
    every = await policies_status(None)
    assert [line for line in every.splitlines() if line.startswith("policy ")] == [
        "policy     batch (schedulerName batch, generation 1)",
        "policy     web (schedulerName promsched, generation 2)",
    ]
    document = json.loads(await policies_status(None, ("web",), output="json"))
    assert [entry["name"] for entry in document["policies"]] == ["web"]
    assert document["policies"][0]["status"]["unschedulableNow"] == 1
    assert await policies_status(None, output="jsonpath={.policies[*].mode}") == "Enforce Enforce"
    with pytest.raises(InspectError) as raised:
        await policies_status(None, ("wbe",))
    assert str(raised.value) == "no valid SchedulingPolicy named wbe (the cluster has: batch, web)"
