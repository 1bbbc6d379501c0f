"""What a sandbox pod uses while it runs: the `sandbox.promsched.io/usage` annotation, or a share of its
requests.

The annotation is a comma-separated list of key=value pairs, each key at most once:

    cpu=1500m          cores or millicores, a Kubernetes quantity (1.5 and 1500m are the same)
    memory=2Gi         bytes, a Kubernetes quantity (Ki Mi Gi ..., k M G ..., or plain bytes)
    diskBusy=20        percent of the node disk's I/O time, a plain number from 0 to 100
    network=2M         bytes per second received plus sent, a Kubernetes quantity

A key the annotation leaves out, and every key of a pod without the annotation, takes its default: 50%
of the pod's CPU request and 80% of its memory request (as kube-scheduler sums them: containers, init
containers, pod-level requests and overhead), no disk time and no traffic. Real pods mostly use less
than they request; these shares are a round middle of that, so a pod without the annotation still
loads its node a little below what it asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from promsched.scheduling.objects.fields import FieldError, list_field, object_field
from promsched.scheduling.objects.pod_requests import pod_requests
from promsched.scheduling.objects.resources import QuantityError, container_requests, parse_quantity

ANNOTATION: Final = "sandbox.promsched.io/usage"
DEFAULT_CPU_SHARE: Final = 0.5
DEFAULT_MEMORY_SHARE: Final = 0.8
EXAMPLE: Final = "cpu=1500m,memory=2Gi,diskBusy=10,network=2M"


class UsageError(ValueError):
    """A usage annotation that cannot be read; the message names the key and the fix."""


@dataclass(frozen=True, slots=True)
class PodUsage:
    """What a pod uses while it runs: CPU in millicores, memory in bytes, disk in percent of the node
    disk's I/O time, network in bytes per second (received plus sent)."""

    milli_cpu: int = 0
    memory: int = 0
    disk_busy: float = 0.0
    network: int = 0

    @property
    def cpu_cores(self) -> float:
        return self.milli_cpu / 1000.0

    def __add__(self, other: PodUsage) -> PodUsage:
        return PodUsage(
            self.milli_cpu + other.milli_cpu,
            self.memory + other.memory,
            self.disk_busy + other.disk_busy,
            self.network + other.network,
        )


ZERO_USAGE: Final = PodUsage()


def _quantity(key: str, value: str, milli: bool, hint: str) -> int:
    try:
        amount = parse_quantity(value, f"{ANNOTATION} {key}", milli=milli)
    except QuantityError:
        raise UsageError(f"{ANNOTATION}: {key}={value!r} is not a Kubernetes quantity; {hint}") from None
    if amount < 0:
        raise UsageError(f"{ANNOTATION}: {key}={value!r} is negative; {hint}")
    return amount


def _percent(key: str, value: str) -> float:
    hint = f"write a percent of the node disk's I/O time from 0 to 100, e.g. {key}=20"
    try:
        amount = float(value)
    except ValueError:
        raise UsageError(f"{ANNOTATION}: {key}={value!r} is not a number; {hint}") from None
    if not 0.0 <= amount <= 100.0:
        raise UsageError(f"{ANNOTATION}: {key}={value!r} is not between 0 and 100; {hint}")
    return amount


def _field(key: str, value: str) -> tuple[str, int | float]:
    if key == "cpu":
        return "milli_cpu", _quantity(
            key, value, True, "write cores or millicores, e.g. cpu=1.5 or cpu=1500m"
        )
    if key == "memory":
        return "memory", _quantity(key, value, False, "write bytes, e.g. memory=2Gi or memory=512Mi")
    if key == "diskBusy":
        return "disk_busy", _percent(key, value)
    if key == "network":
        return "network", _quantity(key, value, False, "write bytes per second, e.g. network=2M")
    raise UsageError(
        f"{ANNOTATION}: unknown key {key!r}; use cpu, memory, diskBusy or network, e.g. {EXAMPLE}"
    )


def parse_usage(text: str, default: PodUsage = ZERO_USAGE) -> PodUsage:
    """The usage an annotation states; keys it leaves out keep `default`'s values.

    Raises UsageError naming the key and the fix."""
    entries = [entry.strip() for entry in text.split(",")]
    if not any(entries):
        raise UsageError(
            f"{ANNOTATION}: empty; write key=value pairs, e.g. {EXAMPLE}, "
            "or remove the annotation to use the default share of the pod's requests"
        )
    changes: dict[str, int | float] = {}
    seen: set[str] = set()
    for entry in entries:
        key, equals, value = (part.strip() for part in entry.partition("="))
        if not equals or not key or not value:
            raise UsageError(f"{ANNOTATION}: {entry!r} is not key=value; write e.g. {EXAMPLE}")
        if key in seen:
            raise UsageError(f"{ANNOTATION}: {key} is given twice; give each key once")
        seen.add(key)
        name, amount = _field(key, value)
        changes[name] = amount
    return replace(default, **changes)  # type: ignore[arg-type]


def default_usage(spec: Mapping[str, Any]) -> PodUsage:
    """The default share of what the pod requests. Raises FieldError for malformed requests."""
    requests = pod_requests(spec)
    return PodUsage(
        milli_cpu=round(requests.milli_cpu * DEFAULT_CPU_SHARE),
        memory=round(requests.memory * DEFAULT_MEMORY_SHARE),
    )


def usage_of(pod: Mapping[str, Any]) -> PodUsage:
    """A pod's usage: its annotation over the default share of its requests.

    Raises UsageError for a malformed annotation and FieldError for malformed requests."""
    metadata = object_field(pod.get("metadata"), "metadata")
    annotation = object_field(metadata.get("annotations"), "metadata.annotations").get(ANNOTATION)
    default = default_usage(object_field(pod.get("spec"), "spec"))
    if annotation is None:
        return default
    if not isinstance(annotation, str):
        raise UsageError(f"{ANNOTATION}: expected a string, got {annotation!r}")
    return parse_usage(annotation, default)


@dataclass(frozen=True, slots=True)
class ContainerShare:
    """One running container's part of its pod's usage: cAdvisor reports usage per container."""

    name: str
    cpu: float
    memory: float


def container_shares(spec: Mapping[str, Any]) -> list[ContainerShare]:
    """The containers that run for the pod's life (app containers and restartable init containers, the
    sidecars), each with its share of the pod's CPU and memory: in proportion to its requests, or evenly
    among them where none requests that resource."""
    running = [
        (c, f"spec.containers[{i}]")
        for i, c in enumerate(list_field(spec.get("containers"), "spec.containers"))
    ]
    running += [
        (c, f"spec.initContainers[{i}]")
        for i, c in enumerate(list_field(spec.get("initContainers"), "spec.initContainers"))
        if c.get("restartPolicy") == "Always"
    ]
    if not running:
        return []
    requests = [container_requests(container, path) for container, path in running]
    cpu_total = sum(r.milli_cpu for r in requests)
    memory_total = sum(r.memory for r in requests)
    even = 1.0 / len(running)
    shares = []
    for (container, path), request in zip(running, requests, strict=True):
        name = container.get("name")
        if not isinstance(name, str) or not name:
            raise FieldError(f"{path}.name: expected a container name, got {name!r}")
        shares.append(
            ContainerShare(
                name,
                request.milli_cpu / cpu_total if cpu_total else even,
                request.memory / memory_total if memory_total else even,
            )
        )
    return shares
