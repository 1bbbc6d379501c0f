"""Node selectors as pods declare them (required and preferred node affinity), compiled once.

Parsing follows kube's label and field selector parsers: a malformed requirement raises `FieldError`
naming its field, rather than matching on a guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from promsched.scheduling.objects.fields import FieldError, integer_field, list_field, object_field
from promsched.scheduling.objects.resources import INT64_MAX

# The only node field a nodeSelectorTerm's matchFields may name.
NODE_NAME_FIELD: Final = "metadata.name"
REQUIRED_NODE_AFFINITY_PATH: Final = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
)
PREFERRED_NODE_AFFINITY_PATH: Final = (
    "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
)
_LABEL_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_FIELD_OPERATORS: Final = ("In", "NotIn")
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int | None:
    """`text` as Go's strconv.ParseInt(text, 10, 64) reads it, or None where that fails."""
    if _INTEGER.fullmatch(text) is None:
        return None
    number = int(text)
    return number if -INT64_MAX - 1 <= number <= INT64_MAX else None


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One matchExpressions or matchFields entry, checked against a label's value (None: no such label)
    or a field's value. `bound` is the integer of Gt and Lt."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()
    bound: int = 0

    def admits(self, value: str | None) -> bool:
        match self.operator:
            case "In":
                return value in self.values
            case "NotIn":
                return value not in self.values
            case "Exists":
                return value is not None
            case "DoesNotExist":
                return value is None
        # Gt and Lt need a label that is an integer.
        number = None if value is None else parse_int64(value)
        if number is None:
            return False
        return number > self.bound if self.operator == "Gt" else number < self.bound


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A nodeSelectorTerm: all its requirements must hold."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    @property
    def is_empty(self) -> bool:
        """No requirement: kube lets such a term select nothing rather than everything."""
        return not self.match_expressions and not self.match_fields

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        return all(
            requirement.admits(labels.get(requirement.key)) for requirement in self.match_expressions
        ) and all(requirement.admits(node_name) for requirement in self.match_fields)


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """One preferredDuringSchedulingIgnoredDuringExecution entry of node affinity."""

    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """Required node affinity: any one term must hold. Empty terms select nothing, as in kube, so they
    are left out when compiling; with no terms left the selector matches no node.

    `node_names` is what kube's NodeAffinity PreFilter finds: when every term names nodes with
    ``matchFields: metadata.name In``, only those nodes are considered at all (DaemonSet pods). None
    when the terms do not confine the pod by name.
    """

    terms: tuple[NodeSelectorTerm, ...]
    node_names: frozenset[str] | None = None

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        return any(term.matches(node_name, labels) for term in self.terms)


def required_affinity(affinity: Mapping[str, Any]) -> NodeSelector | None:
    node_affinity = object_field(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    path = f"{REQUIRED_NODE_AFFINITY_PATH}.nodeSelectorTerms"
    raw_terms = list_field(object_field(required, REQUIRED_NODE_AFFINITY_PATH).get("nodeSelectorTerms"), path)
    terms = tuple(parse_node_selector_term(term, f"{path}[{index}]") for index, term in enumerate(raw_terms))
    return NodeSelector(
        terms=tuple(term for term in terms if not term.is_empty),
        node_names=_node_names(terms) if terms else None,
    )


def preferred_affinity(affinity: Mapping[str, Any]) -> tuple[PreferredTerm, ...]:
    node_affinity = object_field(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    preferred = []
    entries = list_field(
        node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), PREFERRED_NODE_AFFINITY_PATH
    )
    for index, entry in enumerate(entries):
        path = f"{PREFERRED_NODE_AFFINITY_PATH}[{index}]"
        weight = integer_field(entry.get("weight"), f"{path}.weight")
        term = parse_node_selector_term(
            object_field(entry.get("preference"), f"{path}.preference"), f"{path}.preference"
        )
        # As kube's PreferredSchedulingTerms: a zero weight or an empty term adds nothing to any node.
        if weight and not term.is_empty:
            preferred.append(PreferredTerm(weight, term))
    return tuple(preferred)


def parse_node_selector_term(term: Mapping[str, Any], path: str) -> NodeSelectorTerm:
    """A nodeSelectorTerm at `path`, compiled; raises FieldError naming a malformed requirement."""
    expressions = list_field(term.get("matchExpressions"), f"{path}.matchExpressions")
    fields = list_field(term.get("matchFields"), f"{path}.matchFields")
    return NodeSelectorTerm(
        match_expressions=tuple(
            _requirement(requirement, f"{path}.matchExpressions[{index}]", on_field=False)
            for index, requirement in enumerate(expressions)
        ),
        match_fields=tuple(
            _requirement(requirement, f"{path}.matchFields[{index}]", on_field=True)
            for index, requirement in enumerate(fields)
        ),
    )


def _node_names(terms: tuple[NodeSelectorTerm, ...]) -> frozenset[str] | None:
    """The nodes the terms confine the pod to by ``metadata.name In``, as kube's PreFilter works it
    out: the union over terms of each term's intersection; None when some term names no node."""
    names: frozenset[str] = frozenset()
    for term in terms:
        named = [requirement.values for requirement in term.match_fields if requirement.operator == "In"]
        if not named:
            return None
        names |= frozenset.intersection(*named)
    return names


def _requirement(requirement: Mapping[str, Any], path: str, *, on_field: bool) -> NodeSelectorRequirement:
    """Compile one requirement, with the checks of kube's label and field selector parsers."""
    key = requirement.get("key") or ""
    operator = requirement.get("operator") or ""
    values = requirement.get("values") or []
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise FieldError(f"{path}.values: expected a list of strings, got {values!r}")
    operators = _FIELD_OPERATORS if on_field else _LABEL_OPERATORS
    if operator not in operators:
        raise FieldError(f"{path}.operator: {operator!r} is not one of {', '.join(operators)}")
    if on_field and key != NODE_NAME_FIELD:
        raise FieldError(f"{path}.key: {key!r} is not a node field; matchFields supports {NODE_NAME_FIELD}")
    if on_field and len(values) != 1:
        raise FieldError(f"{path}.values: {operator} on a field takes exactly one value, got {values!r}")
    if operator in ("In", "NotIn") and not values:
        raise FieldError(f"{path}.values: {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise FieldError(f"{path}.values: {operator} takes no values, got {values!r}")
    bound = 0
    if operator in ("Gt", "Lt"):
        number = parse_int64(values[0]) if len(values) == 1 else None
        if number is None:
            raise FieldError(f"{path}.values: {operator} takes exactly one integer value, got {values!r}")
        bound = number
    return NodeSelectorRequirement(key=key, operator=operator, values=frozenset(values), bound=bound)
