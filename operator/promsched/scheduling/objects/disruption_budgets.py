"""PodDisruptionBudgets (policy/v1) as preemption weighs them: which victims an eviction would count
against a budget that has no disruption left.

Parsed once per object. As kube-scheduler's DefaultPreemption reads them: a budget applies to the pods
of its namespace that its selector matches, a null or empty selector matches none, a pod already in
``status.disruptedPods`` has been counted by the API server, and ``status.disruptionsAllowed`` (the
disruption controller's figure) is what may still go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promsched.scheduling.objects.fields import FieldError, integer_field, object_field
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.selectors import NOTHING, LabelSelector, parse_label_selector


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int
    disrupted_pods: frozenset[str]  # names the API server has already counted as evicted

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> DisruptionBudget:
        """Parse a PDB as the API returns it; a selector that cannot be read matches no pod, as kube
        treats it (its other fields still raise `FieldError` naming the field)."""
        metadata = object_field(obj.get("metadata"), "metadata")
        spec = object_field(obj.get("spec"), "spec")
        status = object_field(obj.get("status"), "status")
        try:
            selector = parse_label_selector(spec.get("selector"), "spec.selector")
        except FieldError:
            selector = NOTHING
        return cls(
            namespace=metadata.get("namespace") or "",
            name=metadata.get("name") or "",
            selector=selector,
            disruptions_allowed=integer_field(status.get("disruptionsAllowed"), "status.disruptionsAllowed"),
            disrupted_pods=frozenset(object_field(status.get("disruptedPods"), "status.disruptedPods")),
        )

    def covers(self, pod: PodInfo) -> bool:
        """Whether evicting `pod` counts against this budget (kube: an empty selector matches none)."""
        return (
            pod.namespace == self.namespace
            and not self.selector.is_empty
            and self.selector.matches(pod.labels)
            and pod.name not in self.disrupted_pods
        )


def split_by_violation(
    pods: Sequence[PodInfo], budgets: Iterable[DisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating) `pods`, each in the given order: as kube's
    filterPodsWithPDBViolation, each pod takes one disruption from every budget covering it, in order,
    and violates once any of those budgets has none left."""
    budgets = list(budgets)
    allowed = [budget.disruptions_allowed for budget in budgets]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod in pods:
        violates = False
        if pod.labels:  # a pod without labels matches no budget
            for index, budget in enumerate(budgets):
                if budget.covers(pod):
                    allowed[index] -= 1
                    if allowed[index] < 0:
                        violates = True
        (violating if violates else non_violating).append(pod)
    return violating, non_violating
