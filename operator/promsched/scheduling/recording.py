"""A policy's status as the scheduler keeps it: counters, recent decisions, conditions, preflight.

Scheduling changes it in memory many times a second; the scheduler writes it to the API at most once
per policy per second (`dirty` says whether a write is due), so status traffic does not grow with pods.
"""

from __future__ import annotations

import datetime
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from promsched.api.rebalances import RebalanceStatus
from promsched.api.statuses import (
    Condition,
    ConditionStatus,
    ConditionType,
    Decision,
    Preflight,
    SchedulingPolicyStatus,
    UsageEstimate,
    set_condition,
)

MAX_DECISIONS = 50


def condition(
    kind: ConditionType, ok: bool, reason: str, message: str = "", generation: int | None = None
) -> Condition:
    return Condition(
        type=kind.value,
        status=ConditionStatus.TRUE if ok else ConditionStatus.FALSE,
        reason=reason,
        message=message,
        last_transition_time=datetime.datetime.now(datetime.UTC).replace(microsecond=0),
        observed_generation=generation,
    )


class LazyDecision:
    """A decision's record, written when the status shows it: a status write shows the latest few, once
    a second, while a burst decides many pods in between. `write` makes its wire form (the `Decision`
    model's `to_object()`, see `decision_records`), kept once made; `estimate` (for the pod's
    annotation) is kept at once."""

    __slots__ = ("_wire", "_write", "estimate")

    def __init__(self, write: Callable[[], dict[str, Any]], estimate: UsageEstimate | None = None) -> None:
        self._write = write
        self._wire: dict[str, Any] | None = None
        self.estimate = estimate

    def wire(self) -> dict[str, Any]:
        if self._wire is None:
            self._wire = self._write()
        return self._wire

    def get(self) -> Decision:
        return Decision.model_validate(self.wire())


DecisionRecord = Decision | LazyDecision


def built(record: DecisionRecord) -> Decision:
    return record.get() if isinstance(record, LazyDecision) else record


def wire(record: DecisionRecord) -> dict[str, Any]:
    """The record's wire form; a LazyDecision's is made once and shared: read it, do not change it."""
    return record.wire() if isinstance(record, LazyDecision) else record.to_object()


@dataclass
class PolicyStatus:
    """Counts pods, not attempts: `scheduled` pods bound (or scored, in Shadow mode); `unschedulable`
    pods that fitted no node at least once (each counted once); `failing` the pods that fit nowhere
    now, with their latest message. A pod that keeps failing enters the recent decisions again only
    when its message changes, so one stuck pod cannot push the placements out."""

    history: int
    observed_generation: int | None = None
    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    conditions: list[Condition] = field(default_factory=list)
    recorded: deque[DecisionRecord] = field(default_factory=lambda: deque(maxlen=MAX_DECISIONS))
    preflight: Preflight | None = None
    failing: dict[str, str] = field(default_factory=dict)  # pod uid -> why it fits nowhere now
    rebalance: RebalanceStatus | None = None  # the latest rebalance cycle
    dirty: bool = True

    @classmethod
    def resume(cls, existing: SchedulingPolicyStatus, history: int) -> PolicyStatus:
        """Carry counters and conditions over from the stored status, so a restart does not reset them."""
        status = cls(
            history=history,
            observed_generation=existing.observed_generation,
            scheduled=existing.scheduled,
            unschedulable=existing.unschedulable,
            errors=existing.errors,
            conditions=list(existing.conditions),
            preflight=existing.preflight,
            rebalance=existing.rebalance,
        )
        status.recorded.extend(reversed(existing.recent_decisions))
        return status

    @property
    def decisions(self) -> list[Decision]:
        """The recent decisions, oldest first."""
        return [built(record) for record in self.recorded]

    def set_conditions(self, conditions: Sequence[Condition]) -> None:
        updated = self.conditions
        for new in conditions:
            updated = set_condition(updated, new)
        if updated != self.conditions:
            self.conditions = updated
            self.dirty = True

    def record_scheduled(self, uid: str, decision: DecisionRecord) -> None:
        self.failing.pop(uid, None)
        self.scheduled += 1
        self.recorded.append(decision)
        self.dirty = True

    def record_unschedulable(self, uid: str, message: str, decision: DecisionRecord | None) -> None:
        previous = self.failing.get(uid)
        if previous == message:
            return  # the same failure again: nothing new to show
        if previous is None:
            self.unschedulable += 1
        self.failing[uid] = message
        if decision is not None:
            self.recorded.append(decision)
        self.dirty = True

    def forget(self, uid: str) -> None:
        """A pod that is gone, or no longer this policy's to place, fails no more."""
        if self.failing.pop(uid, None) is not None:
            self.dirty = True

    def record_rebalance(self, rebalance: RebalanceStatus) -> None:
        self.rebalance = rebalance
        self.dirty = True

    def record_error(self) -> None:
        self.errors += 1
        self.dirty = True

    def to_status(self) -> dict[str, Any]:
        """The body of the status's merge patch: the model's dump, with the decisions' wire forms
        (made once a record, not by dumping the model each write) where the model has them. It shares
        those with the records: send it, do not change it."""
        shown = list(self.recorded)[-self.history :] if self.history else []
        status = SchedulingPolicyStatus(
            observed_generation=self.observed_generation,
            conditions=self.conditions,
            scheduled=self.scheduled,
            unschedulable=self.unschedulable,
            unschedulable_now=len(self.failing),
            errors=self.errors,
            preflight=self.preflight,
            rebalance=self.rebalance,
        )
        body: dict[str, Any] = {}
        for key, value in status.to_object().items():
            if key == "recentDecisions":  # lastDecision comes just before it
                if self.recorded:  # a copy: its node may be set below
                    body["lastDecision"] = dict(wire(self.recorded[-1]))
                value = [wire(record) for record in reversed(shown)]
            body[key] = value
        # A merge patch keeps fields it does not mention; say explicitly which ones are now empty.
        body.setdefault("lastDecision", None)
        body.setdefault("preflight", None)
        body.setdefault("rebalance", None)
        body.setdefault("recentDecisions", [])
        if body["lastDecision"] is not None:
            body["lastDecision"].setdefault("node", None)  # an unschedulable decision over a bound one
        return body
