"""What `promsched explain` and `promsched score` find: the data between gathering and rendering."""

from __future__ import annotations

from dataclasses import dataclass

from promsched.api.annotations import AnnotatedDecision
from promsched.api.policies import SchedulingPolicy
from promsched.api.rebalances import RebalanceStatus
from promsched.api.statuses import Decision, Preflight, UsageEstimate
from promsched.scheduling.cycle.deciding import Outcome

# `-o`: the human table (default) or a wider one, else "json", "yaml" or "jsonpath=TEMPLATE": the same
# facts as a document.
TABLE = "table"
WIDE = "wide"
JSONPATH_PREFIX = "jsonpath="


class InspectError(RuntimeError):
    """`explain` or `score` cannot answer; the message says why and what to do about it."""


@dataclass(frozen=True)
class RebalanceMention:
    """The pod in a policy's latest rebalance cycle (its status.rebalance): moved off a hot node (its
    reason says by which share, observed or estimated), or kept there, and why."""

    policy: str
    cycle: RebalanceStatus
    node: str  # the hot node
    destination: str  # where its replacement would land; "" when the pod was kept
    reason: str


@dataclass(frozen=True)
class Explanation:
    pod: str  # namespace/name
    bound_to: str  # the pod's spec.nodeName now; "" while Pending
    policy: SchedulingPolicy  # as it is now: the weights shown and the current generation
    recorded: Decision | AnnotatedDecision  # from the policy's status, else from the pod's annotation
    rebalance: tuple[RebalanceMention, ...] = ()  # the policies' latest rebalance cycles that name it


@dataclass(frozen=True)
class Ranking:
    """What `decide()` makes of a pod now, and what Prometheus could not answer."""

    policy: SchedulingPolicy
    pod: str  # how the pod is described in the output
    outcome: Outcome
    preflight: Preflight  # per-plugin query errors and nodes without series, from the same snapshot
    skipped_nodes: tuple[str, ...] = ()  # nodes the scheduler could not use either, with why
    estimate: UsageEstimate | None = None  # what the pod is expected to use (spec.estimation)
