"""Resource quantities as the API writes them, and the requests a pod makes as kube-scheduler counts them.

Quantities follow apimachinery's resource.Quantity: ``<sign><digits>.<digits><suffix>`` where the suffix
is binary (``Ki`` .. ``Ei``), decimal (``n u m "" k M G T P E``) or an exponent (``e3``, ``E-2``). Values
are exact (no floats) and round up, away from zero, as Quantity.Value() and MilliValue() do: cpu counts
in millicores, everything else in whole units. Like Quantity, nothing exceeds the int64 range.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from promsched.scheduling.objects.fields import FieldError, object_field

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
PODS: Final = "pods"

INT64_MAX: Final = 2**63 - 1

# The lexical shape apimachinery's scanner accepts; which suffixes mean something is checked after.
# Like Go's scanner it takes an empty number ("", ".", "+", "Ki") as zero.
_QUANTITY = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
_DECIMAL_SUFFIXES: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# Powers of ten past these bounds change no result: a non-zero value is then either beyond int64 (and
# saturates) or below a billionth of the unit (and rounds up to one unit), so huge exponents stay cheap.
_MAX_POWER: Final = 40
_MIN_POWER_BELOW_DIGITS: Final = 30

HUGEPAGES_PREFIX: Final = "hugepages-"


class QuantityError(FieldError):
    """A quantity that apimachinery would reject; the message names the field and the value."""


def parse_quantity(value: object, path: str, *, milli: bool = False) -> int:
    """`value` in whole units (Quantity.Value()), or in thousandths with `milli` (MilliValue()).

    Rounds up, away from zero. `path` names the field in the error, e.g. ``status.allocatable.cpu``.
    """
    try:
        # Pods repeat a few quantities ("100m", "128Mi"): each text is parsed once.
        return _parsed_text(value, milli) if type(value) is str else _quantity(value, milli)
    except QuantityError as error:
        raise QuantityError(f"{path}: {error}") from None


def _quantity(value: object, milli: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"{value!r} is not a quantity (a string such as '100m' or '1Gi')")
    # The API's JSON decoder trims spaces before parsing; numbers are accepted as their text.
    text = value.strip() if isinstance(value, str) else str(value)
    lexed = _QUANTITY.fullmatch(text)
    if not text or lexed is None:
        raise QuantityError(f"{value!r} is not a valid quantity")
    sign, whole, fraction, suffix = lexed.group(1), lexed.group(2), lexed.group(3) or "", lexed.group(4)
    power_of_ten, power_of_two = _suffix_powers(suffix, value)
    digits = int(whole + fraction or "0")
    if digits == 0:
        return 0
    power_of_ten += (3 if milli else 0) - len(fraction)
    power_of_ten = max(min(power_of_ten, _MAX_POWER), -(len(whole + fraction) + _MIN_POWER_BELOW_DIGITS))
    numerator = digits << power_of_two
    magnitude: int  # int ** int is typed Any, as a negative power would give a float
    if power_of_ten >= 0:
        magnitude = numerator * 10**power_of_ten
    else:
        magnitude = -(-numerator // 10**-power_of_ten)  # ceiling division
    magnitude = min(magnitude, INT64_MAX)
    return -magnitude if sign == "-" else magnitude


_parsed_text = functools.lru_cache(maxsize=4096)(_quantity)


def _suffix_powers(suffix: str, value: object) -> tuple[int, int]:
    """The suffix as (power of ten, power of two)."""
    if suffix in _DECIMAL_SUFFIXES:
        return _DECIMAL_SUFFIXES[suffix], 0
    if suffix in _BINARY_SUFFIXES:
        return 0, _BINARY_SUFFIXES[suffix]
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None or abs(int(exponent.group(1))) > INT64_MAX:
        raise QuantityError(f"{value!r} has an unknown suffix {suffix!r}")
    return int(exponent.group(1)), 0


_NO_SCALARS: Final[Mapping[str, int]] = MappingProxyType({})


def is_scalar_resource(name: str) -> bool:
    """Whether kube-scheduler counts `name` as a scalar: extended (``example.com/foo``), prefixed native
    (``kubernetes.io/...``), hugepages or attachable volumes. Other unprefixed names (``storage``) are
    not counted at all."""
    if "/" in name:
        return "kubernetes.io/" in name or not name.startswith("requests.")
    return name.startswith((HUGEPAGES_PREFIX, "attachable-volumes-"))


@dataclass(frozen=True, slots=True)
class Resources:
    """Amounts of the resources the scheduler counts: cpu in millicores, the rest in units.

    `scalars` holds extended resources, hugepages and the like, by kube name; it is kept sorted by name
    and without zero amounts, so equal resources compare equal.
    """

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    scalars: Mapping[str, int] = field(default_factory=lambda: _NO_SCALARS)

    def __post_init__(self) -> None:
        scalars = {name: self.scalars[name] for name in sorted(self.scalars) if self.scalars[name]}
        # Nearly all have none: one shared empty mapping, not a dict and its proxy each (104 bytes).
        object.__setattr__(self, "scalars", MappingProxyType(scalars) if scalars else _NO_SCALARS)

    def __add__(self, other: Resources) -> Resources:
        # Nothing added, or added to nothing: common in parsing a pod (no init containers, no overhead).
        if other is ZERO_RESOURCES or self is ZERO_RESOURCES:
            return self if other is ZERO_RESOURCES else other
        return self._combined(other, operator.add)

    def __sub__(self, other: Resources) -> Resources:
        return self if other is ZERO_RESOURCES else self._combined(other, operator.sub)

    def max_per_resource(self, other: Resources) -> Resources:
        """The larger amount of each resource: what a pod needs across phases that never overlap."""
        return self._combined(other, max)

    def _combined(self, other: Resources, combine: Callable[[int, int], int]) -> Resources:
        return Resources(
            milli_cpu=combine(self.milli_cpu, other.milli_cpu),
            memory=combine(self.memory, other.memory),
            ephemeral_storage=combine(self.ephemeral_storage, other.ephemeral_storage),
            scalars={
                name: combine(self.scalars.get(name, 0), other.scalars.get(name, 0))
                for name in self.scalars.keys() | other.scalars.keys()
            },
        )

    @property
    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or self.scalars)

    def insufficient(self, requested: Resources, allocatable: Resources) -> list[str]:
        """The kube names of the resources this request does not fit in: `allocatable` less what is
        already `requested` on the node. In kube-scheduler's order: cpu, memory, ephemeral-storage, then
        scalars by name. A scalar the node does not have at all is short too."""
        if (
            # The common case first, in one test: it fits (called for every node in every cycle).
            not self.scalars
            and self.milli_cpu <= allocatable.milli_cpu - requested.milli_cpu
            and self.memory <= allocatable.memory - requested.memory
            and self.ephemeral_storage <= allocatable.ephemeral_storage - requested.ephemeral_storage
        ) or self.is_zero:
            return []
        short: list[str] = []
        if self.milli_cpu > 0 and self.milli_cpu > allocatable.milli_cpu - requested.milli_cpu:
            short.append(CPU)
        if self.memory > 0 and self.memory > allocatable.memory - requested.memory:
            short.append(MEMORY)
        if (
            self.ephemeral_storage > 0
            and self.ephemeral_storage > allocatable.ephemeral_storage - requested.ephemeral_storage
        ):
            short.append(EPHEMERAL_STORAGE)
        for name, amount in self.scalars.items():
            if amount > 0 and amount > allocatable.scalars.get(name, 0) - requested.scalars.get(name, 0):
                short.append(name)
        return short


ZERO_RESOURCES: Final = Resources()


def resources_from_list(resource_list: Mapping[str, Any], path: str) -> Resources:
    """A ResourceList (``{"cpu": "500m", "memory": "1Gi", ...}``) at `path`, counting what the scheduler
    counts; ``pods`` and unprefixed unknown names are left out."""
    return _resources({name: (value, f"{path}.{name}") for name, value in resource_list.items()})


def _resources(entries: Mapping[str, tuple[object, str]]) -> Resources:
    """Resources from ``{name: (quantity, field path)}``."""
    if not entries:
        return ZERO_RESOURCES
    amounts = {CPU: 0, MEMORY: 0, EPHEMERAL_STORAGE: 0}
    scalars = {}
    for name, (value, path) in entries.items():
        if name == CPU:
            amounts[CPU] = parse_quantity(value, path, milli=True)
        elif name in amounts:
            amounts[name] = parse_quantity(value, path)
        elif is_scalar_resource(name):
            scalars[name] = parse_quantity(value, path)
    return Resources(
        milli_cpu=amounts[CPU],
        memory=amounts[MEMORY],
        ephemeral_storage=amounts[EPHEMERAL_STORAGE],
        scalars=scalars,
    )


def container_requests(container: Mapping[str, Any], path: str) -> Resources:
    """What one container requests. A limit stands in for a missing request of the same resource, as
    the API server's defaulting does (on a stored pod that has happened already)."""
    resources = object_field(container.get("resources"), f"{path}.resources")
    entries = {
        name: (value, f"{path}.resources.limits.{name}")
        for name, value in object_field(resources.get("limits"), f"{path}.resources.limits").items()
    }
    entries.update(
        (name, (value, f"{path}.resources.requests.{name}"))
        for name, value in object_field(resources.get("requests"), f"{path}.resources.requests").items()
    )
    return _resources(entries)
