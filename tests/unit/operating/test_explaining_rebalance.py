"""`explain` shows what the policies' latest rebalance cycles did with the pod, and why: its share of
the hot node, observed or estimated, as the move's reason (and its Rebalanced Event) gives it."""

from __future__ import annotations

from typing import Any

from promsched.operating import inspecting
from promsched.operating.inspecting import explain
from promsched.operating.rendering import explanation_document, render_explanation
from support import objects, policies
from support.fake_apis import FakeSender

DECISION = {
    "pod": "shop/web-0",
    "node": "hot-1",
    "time": "2030-01-01T10:00:01Z",
    "latencyMs": 3,
    "generation": 1,
    "mode": "Enforce",
    "topNodes": [],
}
MOVE_REASON = (
    "hot-1 cpu 92% for 5m > 85%; its share: cpu 40% (observed over 5m); "
    "expected destination cool-1 at cpu 60%"
)
KEPT_REASON = "eviction refused by a PodDisruptionBudget: Cannot evict pod"


def rebalance_status(mode: str, *, moved: bool) -> dict[str, Any]:
    entry = {"pod": "shop/web-0", "node": "hot-1"}
    return {
        "mode": mode,
        "lastCycle": "2030-01-01T10:05:00Z",
        "hotNodeCount": 1,
        "moves": [{**entry, "destination": "cool-1", "reason": MOVE_REASON}] if moved else [],
        "blocked": [] if moved else [{**entry, "reason": KEPT_REASON}],
    }


def api(*rebalances: dict[str, Any]) -> FakeSender:
    """The pod shop/web-0 on hot-1, decided by policy web; each of `rebalances` a policy's cycle."""
    pod = objects.pod_object("web-0", "shop", node_name="hot-1", schedulerName="promsched")
    decided = policies.policy_object("web", policies.spec_document(), status={"recentDecisions": [DECISION]})
    others = [
        policies.policy_object(f"rebalancer-{index}", policies.spec_document(), status={"rebalance": cycle})
        for index, cycle in enumerate(rebalances)
    ]
    return FakeSender(
        {
            "/api/v1/namespaces/shop/pods/web-0": pod,
            inspecting.POLICIES_PATH: {"items": [decided, *others]},
        },
        strict=True,
    )


async def test_explain_says_the_pod_would_move_and_by_which_share() -> None:
    found = await explain(api(rebalance_status("DryRun", moved=True)), "shop", "web-0")
    text = render_explanation(found)
    assert (
        "rebalance   would move off hot-1, expected on cool-1 (DryRun cycle of policy rebalancer-0 at "
        f"2030-01-01T10:05:00Z): {MOVE_REASON}"
    ) in text.splitlines()
    assert explanation_document(found)["rebalance"] == [
        {
            "policy": "rebalancer-0",
            "mode": "DryRun",
            "lastCycle": "2030-01-01T10:05:00Z",
            "node": "hot-1",
            "destination": "cool-1",
            "reason": MOVE_REASON,
        }
    ]


async def test_explain_says_why_a_rebalance_kept_the_pod() -> None:
    found = await explain(api(rebalance_status("Enforce", moved=False)), "shop", "web-0")
    assert (
        "rebalance   kept on hot-1 (Enforce cycle of policy rebalancer-0 at 2030-01-01T10:05:00Z): "
        f"{KEPT_REASON}"
    ) in render_explanation(found).splitlines()


async def test_an_explanation_without_rebalancing_says_nothing_of_it() -> None:
    found = await explain(api(), "shop", "web-0")
    assert found.rebalance == ()
    assert "rebalance" not in render_explanation(found)
    assert "rebalance" not in explanation_document(found)
