"""Reading an API object's fields: the walkers for optional object, list and integer fields, so every
malformed field raises a `FieldError` that names it, and the object's resourceVersion as a number."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class FieldError(ValueError):
    """A field of an API object that cannot be read; the message names the field."""


def version_of(metadata: Mapping[str, Any]) -> int | None:
    """The resourceVersion as a number; None where it is not etcd's (nothing to compare)."""
    return parse_version(metadata.get("resourceVersion", ""))


def parse_version(resource_version: str) -> int | None:
    """A resourceVersion as a number; None where it is not etcd's."""
    try:
        return int(resource_version)
    except (TypeError, ValueError):
        return None


def object_field(value: object, path: str) -> Mapping[str, Any]:
    """An optional object field: absent or null reads as empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(f"{path}: expected an object, got {value!r}")
    return value


def list_field(value: object, path: str) -> list[Mapping[str, Any]]:
    """An optional list of objects: absent or null reads as empty."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise FieldError(f"{path}: expected a list of objects, got {value!r}")
    return value


def integer_field(value: object, path: str) -> int:
    """An optional integer field: absent or null reads as 0."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(f"{path}: expected an integer, got {value!r}")
    return value
