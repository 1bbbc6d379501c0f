"""What every SchedulingPolicy model shares: the model bases, string shapes, durations and errors.

The patterns are copied into the CRD, so the API server checks them too; errors name the wire-format
field path and say how to fix the value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, TypeVar

import durationpy
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema
from pydantic.alias_generators import to_camel


class Mode(StrEnum):
    ENFORCE = "Enforce"
    SHADOW = "Shadow"


# --- Durations -----------------------------------------------------------------------------------

# Go's time.ParseDuration syntax without sign, µs or a bare 0: one or more <number><unit>. The pattern
# (the CRD's too) says what a policy may hold; durationpy, the kubernetes client's parser, reads it.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"
DURATION_MAX_LENGTH = 32
_DURATION_RE = re.compile(DURATION_PATTERN)
_DURATION_HINT = "must be a Go duration, e.g. 500ms, 5s, 1m30s, 2h or 0s"
_LONGEST_DAYS = timedelta.max.days  # what durationpy's timedelta holds


def _duration_seconds(value: str) -> float:
    if len(value) > DURATION_MAX_LENGTH or not _DURATION_RE.fullmatch(value):
        raise ValueError(f"{value!r} {_DURATION_HINT}")
    try:
        return durationpy.from_str(value).total_seconds()
    except durationpy.DurationError:
        raise ValueError(f"{value!r} is too long a duration (at most {_LONGEST_DAYS} days)") from None


def parse_duration(value: str, field: str = "duration") -> float:
    """Seconds in a Go-style duration (``1m30s`` -> 90.0); ValueError naming `field` otherwise."""
    try:
        return _duration_seconds(value)
    except ValueError as error:
        raise ValueError(f"{field}: {error}") from None


def check_duration(value: str) -> str:
    _duration_seconds(value)
    return value


Duration = Annotated[
    str,
    AfterValidator(check_duration),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN, "maxLength": DURATION_MAX_LENGTH}),
]

# --- Window aggregations -------------------------------------------------------------------------

# How a built-in plugin sums up its timeRange: the mean, the highest value, or a percentile (p1..p99).
AVG_AGGREGATION = "avg"
MAX_AGGREGATION = "max"
AGGREGATION_PATTERN = r"^(avg|max|p[1-9][0-9]?)$"
_AGGREGATION_HINT = "use avg, max, or pNN with NN in 1..99, e.g. p90"


def check_aggregation(value: str) -> str:
    if not re.fullmatch(AGGREGATION_PATTERN, value):
        raise ValueError(f"{value!r} is not a valid aggregation; {_AGGREGATION_HINT}")
    return value


def aggregation_percentile(value: str | None) -> int | None:
    """The percentile of its window an aggregation takes (max: 100); None for avg (or unset)."""
    if value is None or value == AVG_AGGREGATION:
        return None
    return 100 if value == MAX_AGGREGATION else int(value.removeprefix("p"))


Aggregation = Annotated[
    str,
    AfterValidator(check_aggregation),
    # Room for a mistyped value (p101, p99.9, mean) to get the pattern's hint, not "Too long".
    WithJsonSchema({"type": "string", "pattern": AGGREGATION_PATTERN, "maxLength": 16}),
]

# --- Shared string shapes (the patterns are copied into the CRD, so the API server checks them too) ---

DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
PROMETHEUS_LABEL_PATTERN = r"^[a-zA-Z_][a-zA-Z0-9_]*$"
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
PLUGIN_NAME_PATTERN = r"^[a-zA-Z][a-zA-Z0-9_-]*$"
# Device names end up inside a PromQL matcher: no quotes, backslashes or spaces that could break out.
DEVICE_NAME_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_.:-]*$"
MOUNTPOINT_PATTERN = r"^/[a-zA-Z0-9_./-]*$"
URL_PATTERN = r"^https?://[^\s/?#]+([/?#]\S*)?$"
# devicePattern is embedded in a PromQL string literal: no control characters.
NO_CONTROL_CHARS_PATTERN = r"^[^\x00-\x1f\x7f]*$"
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
# A non-negative Kubernetes quantity with a decimal or binary suffix (no exponents), e.g. 250m or 200Mi.
QUANTITY_PATTERN = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"

DnsSubdomain = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
DnsLabel = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
PrometheusLabel = Annotated[str, Field(min_length=1, max_length=128, pattern=PROMETHEUS_LABEL_PATTERN)]
SecretKey = Annotated[str, Field(min_length=1, max_length=253, pattern=SECRET_KEY_PATTERN)]
DeviceName = Annotated[str, Field(min_length=1, max_length=64, pattern=DEVICE_NAME_PATTERN)]
NodeName = Annotated[str, Field(max_length=253)]
ShortText = Annotated[str, Field(max_length=1024)]
Quantity = Annotated[str, Field(min_length=1, max_length=64, pattern=QUANTITY_PATTERN)]

# Patterns with the hint shown when a value does not match: used in pydantic's errors and as the
# message of the CRD's CEL rule for that pattern, so kubectl and promsched say the same thing.
PATTERN_HINTS = {
    DURATION_PATTERN: _DURATION_HINT,
    AGGREGATION_PATTERN: f"is not a valid aggregation; {_AGGREGATION_HINT}",
    URL_PATTERN: "must be an http:// or https:// URL, e.g. http://prometheus.monitoring:9090",
    DNS_SUBDOMAIN_PATTERN: "must be a lowercase DNS subdomain (a-z, 0-9, '-' and '.'), e.g. promsched",
    DNS_LABEL_PATTERN: "must be a lowercase DNS label (a-z, 0-9 and '-'), e.g. monitoring",
    PROMETHEUS_LABEL_PATTERN: "must be a Prometheus label name (letters, digits, '_'), e.g. instance",
    SECRET_KEY_PATTERN: "must be a Secret key (letters, digits, '-', '_' and '.'), e.g. token",
    PLUGIN_NAME_PATTERN: "must start with a letter and use only letters, digits, '-' and '_', e.g. gpu",
    DEVICE_NAME_PATTERN: "must be a device name of letters, digits, '_', '.', ':' and '-', e.g. eth0",
    MOUNTPOINT_PATTERN: "must be an absolute path of letters, digits, '_', '.', '-' and '/', e.g. /var",
    NO_CONTROL_CHARS_PATTERN: "must not contain control characters such as newlines or tabs",
    QUANTITY_PATTERN: "must be a Kubernetes quantity such as 250m, 1.5, 200Mi or 1G",
}


ModelT = TypeVar("ModelT", bound=BaseModel)


class PolicyError(ValueError):
    """A SchedulingPolicy (or part of one) that does not validate; the message names each field."""


def _field_path(location: Sequence[int | str]) -> str:
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def format_validation_error(error: ValidationError, root: str = "") -> str:
    """One line per problem, each starting with the wire-format field path (``spec.plugins[0].weight``)."""
    lines = []
    for detail in error.errors():
        path = _field_path(([root] if root else []) + list(detail["loc"]))
        message = detail["msg"].removeprefix("Value error, ")
        if detail["type"] == "extra_forbidden":
            message = "unknown field; remove it or fix its spelling (fields are camelCase)"
        elif detail["type"] == "missing":
            message = "required field is missing"
        elif detail["type"] == "string_pattern_mismatch":
            pattern = str(detail.get("ctx", {}).get("pattern"))
            message = PATTERN_HINTS.get(pattern, f"must match the regular expression {pattern}")
        lines.append(f"{path or '(top level)'}: {message}")
    return "\n".join(lines)


class ApiModel(BaseModel):
    """Frozen, camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, alias_generator=to_camel)

    def to_object(self) -> dict[str, Any]:
        """The wire form (camelCase, JSON types, unset optionals left out), ready for the API server."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class SpecModel(ApiModel):
    # Unknown spec fields are mistakes (a typo silently ignored would change scheduling), so reject them.
    model_config = ConfigDict(extra="forbid")


class StatusModel(ApiModel):
    # Status is written by promsched; tolerate what other writers (or newer versions) add.
    model_config = ConfigDict(extra="ignore")


def parse_model(model: type[ModelT], data: Any, root: str) -> ModelT:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise PolicyError(format_validation_error(error, root)) from None
