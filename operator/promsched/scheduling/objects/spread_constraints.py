"""spec.topologySpreadConstraints as kube-scheduler's PodTopologySpread plugin compiles them.

DoNotSchedule constraints filter nodes, ScheduleAnyway ones score them. A constraint counts the pods of
the pod's own namespace that its selector matches, per topology domain (the value of `topologyKey`), over
the nodes its inclusion policies admit: by default the nodes matching the pod's required node affinity
and nodeSelector (nodeAffinityPolicy Honor), tainted or not (nodeTaintsPolicy Ignore).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from promsched.scheduling.objects.fields import FieldError, list_field
from promsched.scheduling.objects.selectors import LabelSelector, parse_label_selector

SPREAD_PATH: Final = "spec.topologySpreadConstraints"
DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
IGNORE: Final = "Ignore"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    selector: LabelSelector  # labelSelector with the pod's values of matchLabelKeys merged in
    hard: bool  # whenUnsatisfiable DoNotSchedule (filter), else ScheduleAnyway (score)
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_node_taints: bool = False


def parse_spread_constraints(
    spec: Mapping[str, Any], pod_labels: Mapping[str, str]
) -> tuple[SpreadConstraint, ...]:
    return tuple(
        _constraint(constraint, f"{SPREAD_PATH}[{index}]", pod_labels)
        for index, constraint in enumerate(list_field(spec.get("topologySpreadConstraints"), SPREAD_PATH))
    )


def _constraint(constraint: Mapping[str, Any], path: str, pod_labels: Mapping[str, str]) -> SpreadConstraint:
    max_skew = _positive(constraint.get("maxSkew"), f"{path}.maxSkew", default=None)
    min_domains = _positive(constraint.get("minDomains"), f"{path}.minDomains", default=1)
    topology_key = constraint.get("topologyKey") or ""
    if not topology_key:
        raise FieldError(f"{path}.topologyKey: a topology key is required")
    when = constraint.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise FieldError(
            f"{path}.whenUnsatisfiable: {when!r} is not one of {DO_NOT_SCHEDULE}, {SCHEDULE_ANYWAY}"
        )
    keys = constraint.get("matchLabelKeys") or []
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise FieldError(f"{path}.matchLabelKeys: expected a list of strings, got {keys!r}")
    selector = parse_label_selector(constraint.get("labelSelector"), f"{path}.labelSelector")
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        # Merging again what the API server may have merged already adds an identical requirement.
        selector=selector.with_labels({key: pod_labels[key] for key in keys if key in pod_labels}),
        hard=when == DO_NOT_SCHEDULE,
        min_domains=min_domains,
        honor_node_affinity=_policy(constraint, "nodeAffinityPolicy", path, default=HONOR) == HONOR,
        honor_node_taints=_policy(constraint, "nodeTaintsPolicy", path, default=IGNORE) == HONOR,
    )


def _positive(value: object, path: str, *, default: int | None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FieldError(f"{path}: expected an integer of at least 1, got {value!r}")
    return value


def _policy(constraint: Mapping[str, Any], name: str, path: str, *, default: str) -> str:
    policy = constraint.get(name) or default
    if policy not in (HONOR, IGNORE):
        raise FieldError(f"{path}.{name}: {policy!r} is not one of {HONOR}, {IGNORE}")
    return str(policy)
