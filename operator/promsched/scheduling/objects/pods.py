"""Pods as the scheduler sees them: parsed once per object, with what the filters match precompiled.

Parsing is strict where a field decides placement: a malformed quantity or node selector raises
`PodSpecError` naming the field, rather than placing the pod on a guess.
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import operator
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final

from promsched.scheduling.objects.affinity_terms import NO_POD_AFFINITY, PodAffinity, parse_pod_affinity
from promsched.scheduling.objects.fields import FieldError, integer_field, list_field, object_field
from promsched.scheduling.objects.node_selectors import (
    NodeSelector,
    PreferredTerm,
    preferred_affinity,
    required_affinity,
)
from promsched.scheduling.objects.nodes import FILTERING_EFFECTS, NodeInfo, Taint
from promsched.scheduling.objects.pod_limits import controller_of, pod_limits
from promsched.scheduling.objects.pod_requests import pod_requests, requests_status_key
from promsched.scheduling.objects.pod_volumes import (
    PodClaim,
    has_local_storage,
    pod_claims,
    unsupported_volumes,
)
from promsched.scheduling.objects.resources import ZERO_RESOURCES, Resources
from promsched.scheduling.objects.spread_constraints import SpreadConstraint, parse_spread_constraints

DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
# A host port bound to this address takes the port on every address of the node.
WILDCARD_HOST_IP: Final = "0.0.0.0"
DEFAULT_PROTOCOL: Final = "TCP"
PREEMPT_NEVER: Final = "Never"
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
# The condition and reason kube-scheduler's preemption sets on its victims before deleting them.
DISRUPTION_TARGET: Final = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"


class PodSpecError(FieldError):
    """A pod whose spec the scheduler cannot act on; the message names the field."""


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
class PodCondition:
    """The pod's PodScheduled condition as the API holds it."""

    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""


# Shared by the pods with none: an empty frozenset is a new 216-byte object each time it is built.
NO_HOST_PORTS: Final[frozenset[HostPort]] = frozenset()
_NO_STRINGS: Final[Mapping[str, str]] = MappingProxyType({})


def _empty_labels() -> Mapping[str, str]:
    return _NO_STRINGS


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
    limits: Resources = ZERO_RESOURCES  # cpu and memory limits, 0 where unbounded (for usage estimates)
    controller: str = ""  # "Kind/name" of the controlling owner: the pods it owns are siblings
    mirror: bool = False  # the kubelet's copy of a static pod (annotation kubernetes.io/config.mirror)
    local_storage: bool = False  # whether a volume is an emptyDir or hostPath: data lost if it moves
    labels: Mapping[str, str] = field(default_factory=_empty_labels)
    node_selector: Mapping[str, str] = field(default_factory=_empty_labels)
    required_affinity: NodeSelector | None = None  # None: the pod has no required node affinity
    preferred_affinity: tuple[PreferredTerm, ...] = ()
    pod_affinity: PodAffinity = NO_POD_AFFINITY
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: frozenset[HostPort] = NO_HOST_PORTS
    claims: tuple[PodClaim, ...] = ()
    preemption_policy: str = ""  # "Never": the pod may not preempt others (kube's default preempts)
    unsupported: tuple[str, ...] = ()
    scheduled_condition: PodCondition | None = None  # status.conditions[type=PodScheduled]
    nominated_node_name: str = ""  # status.nominatedNodeName: where preemption made room for it
    disruption_target: str = ""  # the reason of a DisruptionTarget condition that is True
    source: PodSource | None = field(default=None, compare=False, repr=False)  # parsed objects' only
    key: str = field(init=False)

    def __post_init__(self) -> None:
        # Interned, as `_parse` interns uid and name: each state of a pod parsed and each index of the
        # cache that keys by them then holds one string, not one per watch event decoded.
        object.__setattr__(self, "key", sys.intern(f"{self.namespace}/{self.name}"))

    @property
    def is_terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def terminating_by_preemption(self) -> bool:
        """Deleted by a scheduler's preemption and not gone yet (kube's podTerminatingByPreemption)."""
        return self.deletion_timestamp and self.disruption_target == PREEMPTION_BY_SCHEDULER

    def same_state(self, other: PodInfo) -> bool:
        """Whether `other` holds what this does, but perhaps at another resourceVersion."""
        return _STATE_BUT_VERSION(self) == _STATE_BUT_VERSION(other)

    def counts_alike(self, other: PodInfo) -> bool:
        """Whether `other` differs from this in nothing but `UNCOUNTED_FIELDS`: whatever counts or
        indexes a pod on a node reads of the two is the same, on the same node."""
        return _COUNTED_STATE(self) == _COUNTED_STATE(other)

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

    def scheduled_condition_patch(
        self, status: str, reason: str, message: str, now: str
    ) -> dict[str, str] | None:
        """The PodScheduled condition to write, or None when the pod already has it: kube-scheduler
        patches only a changed status, reason or message, and keeps the transition time while the
        status stays the same."""
        current = self.scheduled_condition
        if current is not None and (current.status, current.reason, current.message) == (
            status,
            reason,
            message,
        ):
            return None
        transition = now
        if current is not None and current.status == status and current.last_transition_time:
            transition = current.last_transition_time
        return {
            "type": "PodScheduled",
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": transition,
        }

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], previous: PodInfo | None = None) -> PodInfo:
        """Parse a pod as the API returns it (a dict); raises `PodSpecError` naming a malformed field.
        `previous`, the pod's last state parsed, lends its spec's parse where the spec is the same."""
        try:
            return cls._parse(obj, previous)
        except FieldError as error:
            raise PodSpecError(str(error)) from error

    @classmethod
    def _parse(cls, obj: Mapping[str, Any], previous: PodInfo | None) -> PodInfo:
        metadata = object_field(obj.get("metadata"), "metadata")
        spec = object_field(obj.get("spec"), "spec")
        status = object_field(obj.get("status"), "status")
        # Interned: these strings repeat across pods, and each decoded event brings its own copies.
        namespace = sys.intern(metadata.get("namespace") or "default")
        name = sys.intern(metadata.get("name") or "")
        # Most events of a pod change only its status, its node or its labels (the binding, which also
        # copies the node's topology labels onto the pod, and the kubelet's reports): the spec's parse
        # is taken from its last state when the rest of the spec is the same, all but what reads the
        # labels where they changed.
        spec_read = {key: value for key, value in spec.items() if key != "nodeName"}
        source = PodSource(_digest(spec_read), _digest(requests_status_key(spec, status)))
        held = previous.source if previous is not None else None
        if (
            previous is not None
            and held is not None
            and held.spec == source.spec
            and (previous.namespace, previous.name) == (namespace, name)
        ):
            parsed = {field: getattr(previous, field) for field in _SPEC_FIELDS}
            labels = previous.labels
            if labels != (metadata.get("labels") or {}):
                labels = _shared_strings(metadata.get("labels"), "metadata.labels")
                parsed[_LABELS_READ] = parse_spread_constraints(spec, labels)
            same_requests = held.requests_status == source.requests_status
            requests = previous.requests if same_requests else pod_requests(spec, status)
        else:
            labels = _shared_strings(metadata.get("labels"), "metadata.labels")
            parsed = _parse_spec(spec, namespace, name, labels)
            requests = pod_requests(spec, status)
        return cls(
            namespace=namespace,
            name=name,
            uid=sys.intern(metadata.get("uid") or ""),
            scheduler_name=sys.intern(spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME),
            node_name=sys.intern(spec.get("nodeName") or ""),
            phase=sys.intern(status.get("phase") or "Pending"),
            priority=integer_field(spec.get("priority"), "spec.priority"),
            creation_timestamp=sys.intern(metadata.get("creationTimestamp") or ""),  # pods share seconds
            resource_version=metadata.get("resourceVersion") or "",
            deletion_timestamp=metadata.get("deletionTimestamp") is not None,
            started_at=_timestamp(status.get("startTime"), "status.startTime"),
            scheduling_gated=bool(spec.get("schedulingGates")),
            requests=requests,
            controller=controller_of(metadata),
            mirror=MIRROR_ANNOTATION in object_field(metadata.get("annotations"), "metadata.annotations"),
            labels=labels,
            preemption_policy=spec.get("preemptionPolicy") or "",
            scheduled_condition=_scheduled_condition(status),
            nominated_node_name=status.get("nominatedNodeName") or "",
            disruption_target=_disruption_target(status),
            source=source,
            **parsed,
        )


# What `PodInfo.same_state` compares: cheaper than a copy at the other's version compared whole.
_STATE_BUT_VERSION: Final = operator.attrgetter(
    *(field.name for field in fields(PodInfo) if field.compare and field.name != "resource_version")
)
# What a pod's binding (its node) and the kubelet's status updates (its phase, start, PodScheduled) change,
# each pod bringing one of each as it is placed and starts running, and nothing that counts pods on
# nodes keeps apart from the pod: the filters, the cache's counts and indexes read none of it (the cache
# holds each pod under its node itself), and what does (estimation reads the start) reads its latest state.
UNCOUNTED_FIELDS: Final = frozenset(
    {"node_name", "phase", "started_at", "scheduled_condition", "resource_version"}
)
# What `PodInfo.counts_alike` compares.
_COUNTED_STATE: Final = operator.attrgetter(
    *(field.name for field in fields(PodInfo) if field.compare and field.name not in UNCOUNTED_FIELDS)
)


@dataclass(frozen=True, slots=True)
class PodSource:
    """Digests of what a PodInfo's costlier fields were parsed from: the spec but its nodeName, and what
    of the status its requests read."""

    spec: bytes
    requests_status: bytes


def _digest(value: Any) -> bytes:
    """128 bits of blake2b over a decoded JSON value's marshal (version 2: without references, so the
    bytes follow the value alone; 4 times faster than its repr): values with equal digests are equal
    (two different values agree as rarely as two random 128-bit numbers), and only 16 bytes are kept."""
    return hashlib.blake2b(marshal.dumps(value, 2), digest_size=16).digest()


# The fields `_parse_spec` gives: read from the spec alone (not its nodeName), with the pod's namespace,
# name and, `_LABELS_READ` only, its labels (matchLabelKeys).
_SPEC_FIELDS: Final = (
    "limits",
    "local_storage",
    "node_selector",
    "required_affinity",
    "preferred_affinity",
    "pod_affinity",
    "spread_constraints",
    "tolerations",
    "host_ports",
    "claims",
    "unsupported",
)
_LABELS_READ: Final = "spread_constraints"


def _parse_spec(
    spec: Mapping[str, Any], namespace: str, name: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    affinity = object_field(spec.get("affinity"), "spec.affinity")
    return {
        "limits": pod_limits(spec),
        "local_storage": has_local_storage(spec),
        "node_selector": _shared_strings(spec.get("nodeSelector"), "spec.nodeSelector"),
        "required_affinity": required_affinity(affinity),
        "preferred_affinity": preferred_affinity(affinity),
        "pod_affinity": parse_pod_affinity(affinity, namespace),
        _LABELS_READ: parse_spread_constraints(spec, labels),
        "tolerations": tuple(
            _toleration(toleration) for toleration in list_field(spec.get("tolerations"), "spec.tolerations")
        ),
        "host_ports": frozenset(_host_ports(spec)) or NO_HOST_PORTS,
        "claims": tuple(pod_claims(spec, name)),
        "unsupported": unsupported_volumes(spec),
    }


def _scheduled_condition(status: Mapping[str, Any]) -> PodCondition | None:
    for condition in list_field(status.get("conditions"), "status.conditions"):
        if condition.get("type") == "PodScheduled":
            return PodCondition(
                status=condition.get("status") or "",
                reason=condition.get("reason") or "",
                message=condition.get("message") or "",
                last_transition_time=condition.get("lastTransitionTime") or "",
            )
    return None


def _disruption_target(status: Mapping[str, Any]) -> str:
    for condition in list_field(status.get("conditions"), "status.conditions"):
        if condition.get("type") == DISRUPTION_TARGET and condition.get("status") == "True":
            return str(condition.get("reason") or "")
    return ""


def _timestamp(value: object, path: str) -> float | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        raise FieldError(f"{path}: expected an RFC 3339 time, got {value!r}") from None


def _shared_strings(value: object, path: str) -> Mapping[str, str]:
    """A read-only map of strings (labels, a node selector): one object for all the pods that carry
    the same, as the pods of one ReplicaSet do."""
    mapping = object_field(value, path)
    if not mapping:
        return _NO_STRINGS
    for key, item in mapping.items():
        if not isinstance(item, str):
            raise FieldError(f"{path}.{key}: expected a string, got {item!r}")
    return _string_map(tuple(mapping.items()))


@functools.lru_cache(maxsize=1024)
def _string_map(items: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    # Interned: label keys and values repeat across pods (see `_parse`), and the cache's index is keyed
    # by them.
    return MappingProxyType({sys.intern(key): sys.intern(item) for key, item in items})


def _toleration(toleration: Mapping[str, Any]) -> Toleration:
    fields = (
        toleration.get("key") or "",
        toleration.get("operator") or "Equal",
        toleration.get("value") or "",
        toleration.get("effect") or "",
    )
    if all(isinstance(value, str) for value in fields):
        return _shared_toleration(*fields)
    return Toleration(*fields)


@functools.lru_cache(maxsize=1024)
def _shared_toleration(key: str, operator: str, value: str, effect: str) -> Toleration:
    """One object per distinct toleration: nearly every pod carries the same ones (admission adds
    not-ready and unreachable to each), and a Toleration is immutable."""
    return Toleration(key=key, operator=operator, value=value, effect=effect)


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
            number = integer_field(port.get("hostPort"), f"{path}.ports[{index}].hostPort")
            if number > 0:
                yield HostPort(
                    protocol=port.get("protocol") or DEFAULT_PROTOCOL,
                    host_ip=port.get("hostIP") or WILDCARD_HOST_IP,
                    port=number,
                )
