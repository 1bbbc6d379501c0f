"""Label selectors (metav1.LabelSelector) compiled once, with apimachinery's semantics.

A null selector selects nothing and an empty one (``{}``) selects everything, as
``metav1.LabelSelectorAsSelector`` has it. `matchLabels` entries are equality requirements.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from promsched.scheduling.objects.fields import FieldError, list_field, object_field

_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str  # In, NotIn, Exists or DoesNotExist
    values: frozenset[str] = frozenset()

    def admits(self, labels: Mapping[str, str]) -> bool:
        match self.operator:
            case "In":
                return labels.get(self.key) in self.values
            case "NotIn":
                # A missing label is not in any set, as in apimachinery.
                return labels.get(self.key) not in self.values
            case "Exists":
                return self.key in labels
        return self.key not in labels


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """All `requirements` must hold; `selects_nothing` is the null selector."""

    requirements: tuple[LabelRequirement, ...] = ()
    selects_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.selects_nothing:
            return False
        return all(requirement.admits(labels) for requirement in self.requirements)

    @property
    def is_empty(self) -> bool:
        """No requirement at all: kube's ``Selector.Empty()`` (the everything selector)."""
        return not self.selects_nothing and not self.requirements

    def with_labels(self, labels: Mapping[str, str]) -> LabelSelector:
        """This selector narrowed to pods that also carry `labels` (matchLabelKeys merged in)."""
        if not labels or self.selects_nothing:
            return self
        added = tuple(
            LabelRequirement(key, "In", frozenset({value})) for key, value in sorted(labels.items())
        )
        return LabelSelector(added + self.requirements)

    def equality_keys(self) -> list[tuple[str, frozenset[str]]]:
        """(key, values) of the In requirements: a pod matches only with one of those values, so an
        index by label narrows the pods to check."""
        return [(r.key, r.values) for r in self.requirements if r.operator == "In"]


NOTHING: Final = LabelSelector(selects_nothing=True)
EVERYTHING: Final = LabelSelector()


def parse_label_selector(value: object, path: str) -> LabelSelector:
    """A metav1.LabelSelector at `path`; absent or null is the selector of nothing."""
    if value is None:
        return NOTHING
    selector = object_field(value, path)
    requirements = []
    match_labels = object_field(selector.get("matchLabels"), f"{path}.matchLabels")
    for key, label in sorted(match_labels.items()):
        if not isinstance(label, str):
            raise FieldError(f"{path}.matchLabels.{key}: expected a string, got {label!r}")
        requirements.append(LabelRequirement(key, "In", frozenset({label})))
    expressions = list_field(selector.get("matchExpressions"), f"{path}.matchExpressions")
    for index, expression in enumerate(expressions):
        requirements.append(_requirement(expression, f"{path}.matchExpressions[{index}]"))
    return LabelSelector(tuple(requirements))


def _requirement(expression: Mapping[str, Any], path: str) -> LabelRequirement:
    key = expression.get("key") or ""
    operator = expression.get("operator") or ""
    values = expression.get("values") or []
    if not key:
        raise FieldError(f"{path}.key: a label key is required")
    if operator not in _OPERATORS:
        raise FieldError(f"{path}.operator: {operator!r} is not one of {', '.join(_OPERATORS)}")
    if not isinstance(values, list) or not all(isinstance(item, str) for item in values):
        raise FieldError(f"{path}.values: expected a list of strings, got {values!r}")
    if operator in ("In", "NotIn") and not values:
        raise FieldError(f"{path}.values: {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise FieldError(f"{path}.values: {operator} takes no values, got {values!r}")
    return LabelRequirement(key, operator, frozenset(values))
