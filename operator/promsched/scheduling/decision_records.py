"""A decision's record for the policy status: what the cycle left, written straight to the wire form.

The status shows the latest `decisionHistory` decisions once a second while a burst decides many pods
in between, so a record keeps only what it shows (the few nodes, the filter counts) and is written when
a status write first shows it. It is written as the plain dicts the API server gets, not through the
`Decision` model: at 1000 nodes a status body with ten new decisions took about 520 µs of CPU that way,
about 110 µs this way (`python -m bench.decide_micro --status`, issue 21).
`promsched.api.statuses.Decision` stays the schema (the CRD is generated from it);
tests/unit/scheduling/test_decision_records.py pins that `wire()` is byte for byte the model's
`to_object()` for the same values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from promsched.api.fields import Mode
from promsched.api.statuses import UsageEstimate
from promsched.metrics.scoring import NodeResult, PluginResult

# What status.lastDecision.topNodes[].plugins holds: the policy's up to 20 plugins. Placement
# preferences follow them and are left out of the status (not of the annotation) past that.
PLUGINS_SHOWN = 20
# The Decision model's limits on what a record shows.
FILTER_REASONS_SHOWN = 32
FILTER_REASON_LENGTH = 1024


@dataclass(frozen=True, slots=True)
class DecisionFacts:
    """What a decision's record shows, as the cycle left it."""

    pod: str  # namespace/name
    node: str | None  # None: no node fitted
    decided_at: float  # Unix time
    latency_ms: float
    generation: int  # of the policy that decided
    mode: Mode
    shown: tuple[NodeResult, ...]  # the nodes the record shows, in order
    filtered: Mapping[str, int]  # reason -> nodes filtered out for it
    estimate: UsageEstimate | None

    def wire(self) -> dict[str, Any]:
        """`Decision(...).to_object()` for these values: camelCase, JSON types, absent optionals left out
        (pydantic's float fields make ints floats, hence the float())."""
        wire: dict[str, Any] = {"pod": self.pod}
        if self.node is not None:
            wire["node"] = self.node
        wire["time"] = datetime.fromtimestamp(self.decided_at, UTC).isoformat().replace("+00:00", "Z")
        wire["latencyMs"] = float(self.latency_ms)
        wire["generation"] = self.generation
        wire["mode"] = self.mode.value
        wire["topNodes"] = [
            {
                "node": result.node,
                "total": float(result.total),
                "plugins": [_plugin(p) for p in result.plugins[:PLUGINS_SHOWN]],
            }
            for result in self.shown
        ]
        most_first = sorted(self.filtered.items(), key=lambda item: -item[1])[:FILTER_REASONS_SHOWN]
        wire["filtered"] = [
            {"reason": reason[:FILTER_REASON_LENGTH], "count": count} for reason, count in most_first
        ]
        if self.estimate is not None:
            wire["estimate"] = self.estimate.to_object()
        return wire


def _plugin(result: PluginResult) -> dict[str, Any]:
    plugin: dict[str, Any] = {"name": result.name}
    if result.raw is not None:
        plugin["raw"] = float(result.raw)
    if result.score is not None:
        plugin["score"] = float(result.score)
    return plugin
