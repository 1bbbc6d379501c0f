"""Pods as the scheduler sees them: parsed once per object, with what the filters match precompiled.

Parsing is strict where a field decides placement: a malformed quantity or node selector raises
`PodSpecError` naming the field, rather than placing the pod on a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from promsched.scheduling.affinity_terms import NO_POD_AFFINITY, PodAffinity, parse_pod_affinity
from promsched.scheduling.nodes import FILTERING_EFFECTS
from promsched.scheduling.resources import (
    INT64_MAX,
    ZERO_RESOURCES,
    FieldError,
    Resources,
    list_field,
    object_field,
    pod_requests,
)
from promsched.scheduling.spread_constraints import SpreadConstraint, parse_spread_constraints

if TYPE_CHECKING:
    from promsched.scheduling.nodes import NodeInfo, Taint

DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
# A host port bound to this address takes the port on every address of the node.
WILDCARD_HOST_IP: Final = "0.0.0.0"
DEFAULT_PROTOCOL: Final = "TCP"
# The only node field a nodeSelectorTerm's matchFields may name.
NODE_NAME_FIELD: Final = "metadata.name"
REQUIRED_NODE_AFFINITY_PATH: Final = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
)
PREFERRED_NODE_AFFINITY_PATH: Final = (
    "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
)
PREEMPT_NEVER: Final = "Never"
# Inline volumes that kube-scheduler's VolumeRestrictions plugin checks for conflicting mounts on a node;
# promsched does not track those mounts, so it refuses pods that use them.
CONFLICT_CHECKED_VOLUMES: Final = ("gcePersistentDisk", "awsElasticBlockStore", "iscsi", "rbd")

_LABEL_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_FIELD_OPERATORS: Final = ("In", "NotIn")
_INTEGER = re.compile(r"[+-]?[0-9]+")


class PodSpecError(FieldError):
    """A pod whose spec the scheduler cannot act on; the message names the field."""


def parse_int64(text: str) -> int | None:
    """`text` as Go's strconv.ParseInt(text, 10, 64) reads it, or None where that fails."""
    if _INTEGER.fullmatch(text) is None:
        return None
    number = int(text)
    return number if -INT64_MAX - 1 <= number <= INT64_MAX else None


@dataclass(frozen=True, slots=True)
class HostPort:
    """A port a container takes on its node (containerPort.hostPort > 0), with the API's defaults."""

    protocol: str
    host_ip: str
    port: int


@dataclass(frozen=True, slots=True)
class Toleration:
    """One entry of spec.tolerations; an empty key (with Exists) or effect matches every key or effect."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        # Any other operator (one from a newer API) tolerates nothing, as in kube.
        return self.operator == "Equal" and self.value == taint.value


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
class PodClaim:
    """A PersistentVolumeClaim one of the pod's volumes uses. `path` names the volume's field; an
    ephemeral volume's claim is created for the pod by the ephemeral volume controller, named
    ``<pod>-<volume>``."""

    path: str
    name: str
    ephemeral: bool = False


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


def _empty_labels() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the scheduler needs of one pod object. `key` is ``namespace/name``.

    `unsupported` names the spec fields that promsched does not honour yet and kube-scheduler would;
    the scheduler refuses such pods rather than place them while ignoring a constraint.
    """

    namespace: str
    name: str
    uid: str = ""
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    node_name: str = ""
    phase: str = "Pending"
    priority: int = 0
    creation_timestamp: str = ""
    resource_version: str = ""
    deletion_timestamp: bool = False  # whether metadata.deletionTimestamp is set
    started_at: float | None = None  # status.startTime as unix seconds: since when the pod may load its node
    scheduling_gated: bool = False  # whether spec.schedulingGates is non-empty
    requests: Resources = ZERO_RESOURCES
    labels: Mapping[str, str] = field(default_factory=_empty_labels)
    node_selector: Mapping[str, str] = field(default_factory=_empty_labels)
    required_affinity: NodeSelector | None = None  # None: the pod has no required node affinity
    preferred_affinity: tuple[PreferredTerm, ...] = ()
    pod_affinity: PodAffinity = NO_POD_AFFINITY
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: frozenset[HostPort] = frozenset()
    claims: tuple[PodClaim, ...] = ()
    preemption_policy: str = ""  # "Never": the pod may not preempt others (kube's default preempts)
    unsupported: tuple[str, ...] = ()
    key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")

    @property
    def is_terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def tolerates(self, taint: Taint) -> bool:
        return any(toleration.tolerates(taint) for toleration in self.tolerations)

    def untolerated_filtering_taint(self, node: NodeInfo) -> Taint | None:
        """The node's first NoSchedule or NoExecute taint this pod does not tolerate."""
        for taint in node.taints:
            if taint.effect in FILTERING_EFFECTS and not self.tolerates(taint):
                return taint
        return None

    def selects_node(self, node: NodeInfo) -> bool:
        """Whether the node matches spec.nodeSelector and required node affinity (kube's
        RequiredNodeAffinity, shared by the NodeAffinity filter and topology spreading)."""
        labels = node.labels
        for key, value in self.node_selector.items():
            if labels.get(key) != value:
                return False
        return self.required_affinity is None or self.required_affinity.matches(node.name, labels)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> PodInfo:
        """Parse a pod as the API returns it (a dict); raises `PodSpecError` naming a malformed field."""
        try:
            return cls._parse(obj)
        except FieldError as error:
            raise PodSpecError(str(error)) from error

    @classmethod
    def _parse(cls, obj: Mapping[str, Any]) -> PodInfo:
        metadata = object_field(obj.get("metadata"), "metadata")
        spec = object_field(obj.get("spec"), "spec")
        status = object_field(obj.get("status"), "status")
        namespace = metadata.get("namespace") or "default"
        name = metadata.get("name") or ""
        labels = _string_map(metadata.get("labels"), "metadata.labels")
        affinity = object_field(spec.get("affinity"), "spec.affinity")
        return cls(
            namespace=namespace,
            name=name,
            uid=metadata.get("uid") or "",
            scheduler_name=spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME,
            node_name=spec.get("nodeName") or "",
            phase=status.get("phase") or "Pending",
            priority=_integer(spec.get("priority"), "spec.priority"),
            creation_timestamp=metadata.get("creationTimestamp") or "",
            resource_version=metadata.get("resourceVersion") or "",
            deletion_timestamp=metadata.get("deletionTimestamp") is not None,
            started_at=_timestamp(status.get("startTime"), "status.startTime"),
            scheduling_gated=bool(spec.get("schedulingGates")),
            requests=pod_requests(spec),
            labels=MappingProxyType(labels),
            node_selector=MappingProxyType(_string_map(spec.get("nodeSelector"), "spec.nodeSelector")),
            required_affinity=_required_affinity(affinity),
            preferred_affinity=_preferred_affinity(affinity),
            pod_affinity=parse_pod_affinity(affinity, namespace),
            spread_constraints=parse_spread_constraints(spec, labels),
            tolerations=tuple(
                _toleration(toleration)
                for toleration in list_field(spec.get("tolerations"), "spec.tolerations")
            ),
            host_ports=frozenset(_host_ports(spec)),
            claims=tuple(_claims(spec, name)),
            preemption_policy=spec.get("preemptionPolicy") or "",
            unsupported=_unsupported(spec),
        )


def _integer(value: object, path: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(f"{path}: expected an integer, got {value!r}")
    return value


def _timestamp(value: object, path: str) -> float | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        raise FieldError(f"{path}: expected an RFC 3339 time, got {value!r}") from None


def _string_map(value: object, path: str) -> dict[str, str]:
    mapping = object_field(value, path)
    for key, item in mapping.items():
        if not isinstance(item, str):
            raise FieldError(f"{path}.{key}: expected a string, got {item!r}")
    return dict(mapping)


def _toleration(toleration: Mapping[str, Any]) -> Toleration:
    return Toleration(
        key=toleration.get("key") or "",
        operator=toleration.get("operator") or "Equal",
        value=toleration.get("value") or "",
        effect=toleration.get("effect") or "",
    )


def _required_affinity(affinity: Mapping[str, Any]) -> NodeSelector | None:
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


def _preferred_affinity(affinity: Mapping[str, Any]) -> tuple[PreferredTerm, ...]:
    node_affinity = object_field(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    preferred = []
    entries = list_field(
        node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), PREFERRED_NODE_AFFINITY_PATH
    )
    for index, entry in enumerate(entries):
        path = f"{PREFERRED_NODE_AFFINITY_PATH}[{index}]"
        weight = _integer(entry.get("weight"), f"{path}.weight")
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


def _running_containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, container) for the containers that run as long as the pod: sidecar init containers (the
    others finish before the app starts) and the app containers."""
    for index, container in enumerate(list_field(spec.get("initContainers"), "spec.initContainers")):
        if container.get("restartPolicy") == "Always":
            yield f"spec.initContainers[{index}]", container
    for index, container in enumerate(list_field(spec.get("containers"), "spec.containers")):
        yield f"spec.containers[{index}]", container


def _host_ports(spec: Mapping[str, Any]) -> Iterator[HostPort]:
    for path, container in _running_containers(spec):
        for index, port in enumerate(list_field(container.get("ports"), f"{path}.ports")):
            number = _integer(port.get("hostPort"), f"{path}.ports[{index}].hostPort")
            if number > 0:
                yield HostPort(
                    protocol=port.get("protocol") or DEFAULT_PROTOCOL,
                    host_ip=port.get("hostIP") or WILDCARD_HOST_IP,
                    port=number,
                )


def _claims(spec: Mapping[str, Any], pod_name: str) -> Iterator[PodClaim]:
    for index, volume in enumerate(list_field(spec.get("volumes"), "spec.volumes")):
        path = f"spec.volumes[{index}]"
        if volume.get("persistentVolumeClaim") is not None:
            source = object_field(volume["persistentVolumeClaim"], f"{path}.persistentVolumeClaim")
            yield PodClaim(f"{path}.persistentVolumeClaim", source.get("claimName") or "")
        elif volume.get("ephemeral") is not None:
            yield PodClaim(f"{path}.ephemeral", f"{pod_name}-{volume.get('name') or ''}", ephemeral=True)


def _unsupported(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields kube-scheduler would honour and promsched cannot yet: resource claims (dynamic
    resource allocation) and inline disks whose conflicting mounts kube checks per node."""
    fields = [
        f"spec.volumes[{index}].{source}"
        for index, volume in enumerate(list_field(spec.get("volumes"), "spec.volumes"))
        for source in CONFLICT_CHECKED_VOLUMES
        if volume.get(source)
    ]
    if spec.get("resourceClaims"):
        fields.append("spec.resourceClaims")
    return tuple(fields)
