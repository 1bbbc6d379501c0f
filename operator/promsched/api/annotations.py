"""The `promsched.io/decision` annotation: the compact record of a decision that the binding puts on
the pod, written by the scheduler and read by `promsched explain`. One codec, so the two never drift.

It holds the chosen node and the best nodes' totals and plugin scores, rounded, without raw values,
and the pod's usage estimate (millicores, bytes and how each was reached): it must stay small on every
pod, and the policy's status keeps the full record of recent decisions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import orjson

from promsched.api.statuses import NodeScore, PluginScore, UsageEstimate

DECISION_ANNOTATION: Final = "promsched.io/decision"


class AnnotationError(ValueError):
    """The annotation is not one promsched wrote."""


class _ScoredPlugin(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def score(self) -> float | None: ...


class _ScoredNode(Protocol):
    @property
    def node(self) -> str: ...

    @property
    def total(self) -> float: ...

    @property
    def plugins(self) -> Sequence[_ScoredPlugin]: ...


@dataclass(frozen=True)
class AnnotatedDecision:
    """The compact record on the pod: the chosen node and the best nodes' scores, no raw values."""

    node: str
    top_nodes: tuple[NodeScore, ...]
    estimate: UsageEstimate | None = None


def encode_decision(node: str, top: Sequence[_ScoredNode], estimate: UsageEstimate | None = None) -> str:
    """The annotation's value for a pod bound to `node`, with `top`, the best nodes, first to last, and
    what the pod was expected to use."""
    entries = [
        {
            "node": scored.node,
            "total": round(scored.total, 1),
            "plugins": {p.name: None if p.score is None else round(p.score, 1) for p in scored.plugins},
        }
        for scored in top
    ]
    document: dict[str, object] = {"node": node, "top": entries}
    if estimate is not None:
        document["est"] = {
            "cpu": [estimate.milli_cpu, estimate.cpu_basis],
            "memory": [estimate.memory, estimate.memory_basis],
        }
    # orjson: compact like json.dumps with separators, at a tenth of its CPU (one annotation a pod bound).
    return orjson.dumps(document).decode()


def decode_decision(text: str) -> AnnotatedDecision:
    try:
        data = json.loads(text)
        top = tuple(
            NodeScore(
                node=entry["node"],
                total=entry["total"],
                plugins=[PluginScore(name=name, score=score) for name, score in entry["plugins"].items()],
            )
            for entry in data["top"]
        )
        estimate = None
        if "est" in data:
            (milli_cpu, cpu_basis), (memory, memory_basis) = data["est"]["cpu"], data["est"]["memory"]
            estimate = UsageEstimate(
                milli_cpu=milli_cpu, memory=memory, cpu_basis=cpu_basis, memory_basis=memory_basis
            )
        return AnnotatedDecision(node=data["node"], top_nodes=top, estimate=estimate)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise AnnotationError(f"the pod's {DECISION_ANNOTATION} annotation cannot be read: {error}") from None
