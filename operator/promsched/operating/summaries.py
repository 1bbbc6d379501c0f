"""`promsched status`: one screen per policy, from what the operator wrote to its status.

Mode, whether it is Ready and why, the other conditions, the counters, the last decisions, the pods that
fitted nowhere with why, and the latest rebalance cycle. Rendering is pure, as for explain and score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from promsched.api.policies import SchedulingPolicy
from promsched.api.rebalances import RebalanceMode
from promsched.api.statuses import Condition, ConditionType, Decision
from promsched.operating.connecting import connected
from promsched.operating.inspecting import valid_policies
from promsched.operating.inspections import TABLE, WIDE, InspectError
from promsched.operating.rendering import fields, render_document
from promsched.operating.tables import PLAIN, Screen, table

# Decisions shown per policy; -o wide shows every one the status keeps (spec.decisionHistory).
SHOWN_DECISIONS = 5


def render_status(policy: SchedulingPolicy, screen: Screen = PLAIN, *, wide: bool = False) -> str:
    spec, status = policy.spec, policy.status
    rows = [
        ("policy", f"{policy.name} (schedulerName {spec.scheduler_name}, generation {policy.generation})"),
        ("mode", spec.mode.value),
    ]
    if status is None:
        rows.append(("ready", "unknown: no status yet; check that the operator runs"))
        return "\n".join(fields(rows, screen))
    conditions = {condition.type: condition for condition in status.conditions}
    ready = conditions.get(ConditionType.READY)
    rows.append(("ready", _condition(ready) if ready else "unknown: the operator has not said yet"))
    if status.observed_generation is not None and status.observed_generation != policy.generation:
        rows.append(("observed", f"generation {status.observed_generation}: the operator is behind the spec"))
    others = [condition for condition in status.conditions if condition.type != ConditionType.READY]
    rows += [(condition.type, _condition(condition)) for condition in others]
    rows.append(
        (
            "pods",
            f"{status.scheduled} scheduled, {status.unschedulable} unschedulable "
            f"({status.unschedulable_now} waiting now), {status.errors} errors",
        )
    )
    rows.append(("rebalance", _rebalance(policy)))
    lines = fields(rows, screen)
    decisions = sorted(_decisions(policy), key=lambda decision: decision.time, reverse=True)
    shown = decisions if wide else decisions[:SHOWN_DECISIONS]
    if shown:
        lines += ["", f"Last decisions ({len(shown)} of the {len(decisions)} the status keeps):"]
        decided = [["TIME", "POD", "NODE", "LATENCY"]]
        decided += [
            [_timestamp(d), d.pod, d.node or "(none fitted)", f"{d.latency_ms:.0f} ms"] for d in shown
        ]
        lines.append(table(decided, screen=screen, indent=2))
    unschedulable = [decision for decision in decisions if decision.node is None]
    if unschedulable:
        lines += ["", "Unschedulable (the latest decision that found no node, per pod):"]
        latest: dict[str, Decision] = {}
        for decision in unschedulable:
            latest.setdefault(decision.pod, decision)
        why = [[pod, _reasons(decision)] for pod, decision in latest.items()]
        lines.append(table(why, screen=screen, header=False, indent=2))
    cycle = status.rebalance
    if cycle is not None and (cycle.moves or cycle.blocked):
        moved = "evicted" if cycle.mode is RebalanceMode.ENFORCE else "would move"
        moves = [
            [move.pod, f"{moved} off {move.node} to {move.destination}", move.reason] for move in cycle.moves
        ]
        moves += [[kept.pod or "-", f"kept on {kept.node}", kept.reason] for kept in cycle.blocked]
        lines += ["", "Rebalance, latest cycle:", table(moves, screen=screen, header=False, indent=2)]
    return "\n".join(lines)


def _condition(condition: Condition) -> str:
    said = f" ({condition.reason})" if condition.reason else ""
    message = f": {condition.message}" if condition.message else ""
    return f"{condition.status.value}{said}{message}"


def _decisions(policy: SchedulingPolicy) -> list[Decision]:
    status = policy.status
    if status is None:
        return []
    recent = list(status.recent_decisions)
    last = status.last_decision
    if last is not None and all(
        decision.pod != last.pod or decision.time != last.time for decision in recent
    ):
        recent.append(last)
    return recent


def _reasons(decision: Decision) -> str:
    if not decision.filtered:
        return "no node fitted"
    counted = sorted(decision.filtered, key=lambda entry: -entry.count)
    return "; ".join(f"{entry.reason} ({entry.count})" for entry in counted)


def _rebalance(policy: SchedulingPolicy) -> str:
    mode = policy.spec.rebalance.mode
    cycle = policy.status.rebalance if policy.status is not None else None
    if mode is RebalanceMode.OFF:
        return "Off"
    if cycle is None:
        return f"{mode.value}, no cycle yet"
    hot = ", ".join(sorted({node.node for node in cycle.hot_nodes}))
    said = (
        f"{cycle.mode.value} cycle at {cycle.last_cycle.strftime('%Y-%m-%dT%H:%M:%SZ')}: "
        f"{cycle.hot_node_count} hot node(s){f' ({hot})' if hot else ''}, {len(cycle.moves)} move(s), "
        f"{len(cycle.blocked)} kept, {cycle.evictions} eviction(s) since the operator started"
    )
    return f"{said}; {cycle.message}" if cycle.message else said


def _timestamp(decision: Decision) -> str:
    return decision.time.strftime("%Y-%m-%dT%H:%M:%SZ")


def status_document(policies: list[SchedulingPolicy]) -> dict[str, Any]:
    """What `status` shows, for scripts: each policy's name, scheduler name, mode and status as written."""
    return {
        "policies": [
            {
                "name": policy.name,
                "schedulerName": policy.spec.scheduler_name,
                "mode": policy.spec.mode.value,
                "generation": policy.generation,
                "status": policy.status.to_object() if policy.status is not None else None,
            }
            for policy in policies
        ]
    }


async def policies_status(
    kubeconfig: Path | None,
    names: tuple[str, ...] = (),
    *,
    context: str | None = None,
    output: str = TABLE,
    screen: Screen = PLAIN,
) -> str:
    """`promsched status [POLICY...]`: the named policies (default: every one), a screen each."""
    async with connected(kubeconfig, context) as client:
        policies = sorted(await valid_policies(client), key=lambda policy: policy.name)
    if names:
        known = {policy.name for policy in policies}
        missing = [name for name in names if name not in known]
        if missing:
            have = ", ".join(sorted(known)) or "none"
            raise InspectError(
                f"no valid SchedulingPolicy named {', '.join(missing)} (the cluster has: {have})"
            )
        policies = [policy for policy in policies if policy.name in names]
    if output not in (TABLE, WIDE):
        return render_document(status_document(policies), output)
    if not policies:
        return "No SchedulingPolicy in this cluster; create one (see examples/)."
    return "\n\n".join(render_status(policy, screen, wide=output == WIDE) for policy in policies)
