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
    """A decision's record, built when the status shows it: a status write shows the latest few, once a
    second, while a burst decides many pods in between. `estimate` (for the pod's annotation) is kept
    at once."""

    __slots__ = ("_build", "_built", "estimate")

    def __init__(self, build: Callable[[], Decision], estimate: UsageEstimate | None = None) -> None:
        self._build = build
        self._built: Decision | None = None
        self.estimate = estimate

    def get(self) -> Decision:
        if self._built is None:
            self._built = self._build()
        return self._built


DecisionRecord = Decision | LazyDecision


def built(record: DecisionRecord) -> Decision:
    return record.get() if isinstance(record, LazyDecision) else record


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
        # Built here, and only the ones shown.
        recent = [built(record) for record in list(self.recorded)[-self.history :]] if self.history else []
        recent.reverse()
        status = SchedulingPolicyStatus(
            observed_generation=self.observed_generation,
            conditions=self.conditions,
            scheduled=self.scheduled,
            unschedulable=self.unschedulable,
            unschedulable_now=len(self.failing),
            errors=self.errors,
            last_decision=built(self.recorded[-1]) if self.recorded else None,
            recent_decisions=recent,
            preflight=self.preflight,
            rebalance=self.rebalance,
        )
        body = status.to_object()
        # A merge patch keeps fields it does not mention; say explicitly which ones are now empty.
        body.setdefault("lastDecision", None)
        body.setdefault("preflight", None)
        body.setdefault("rebalance", None)
        body.setdefault("recentDecisions", [])
        if body["lastDecision"] is not None:
            body["lastDecision"].setdefault("node", None)  # an unschedulable decision over a bound one
        return body
