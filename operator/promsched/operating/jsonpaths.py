"""`-o jsonpath=TEMPLATE`: kubectl's JSONPath templates, the part scripts use.

Text outside braces is printed as is; `{.a.b}` walks fields, `[N]` takes an item (negative: from the
end), `[*]` or `.*` every item, and `{"\\n"}`-style string literals print their text. As in kubectl,
several results are joined by a space, a string is printed bare and a list or mapping as JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from promsched.operating.inspections import InspectError


class JsonPathError(InspectError):
    """The template cannot be read, or names a field the document lacks: the command says so."""


_STEP = re.compile(r"\.([A-Za-z0-9_\-]+|\*)|\[(\*|-?[0-9]+)\]")
_LITERAL = re.compile(r'^"((?:[^"\\]|\\.)*)"$')


def render_jsonpath(document: Any, template: str) -> str:
    """The template with each `{...}` replaced by what it selects in `document`."""
    out, position = [], 0
    for match in re.finditer(r"\{([^{}]*)\}", template):
        out.append(template[position : match.start()])
        out.append(_expression(document, match[1].strip(), template))
        position = match.end()
    rest = template[position:]
    if "{" in rest or "}" in rest:
        raise JsonPathError(f"unclosed or nested brace in jsonpath template {template!r}")
    return "".join(out) + rest


def _expression(document: Any, expression: str, template: str) -> str:
    literal = _LITERAL.match(expression)
    if literal:
        return json.loads(f'"{literal[1]}"')  # type: ignore[no-any-return]
    path = expression.removeprefix("$")
    steps = list(_STEP.finditer(path))
    if "".join(step[0] for step in steps) != path:
        raise JsonPathError(f"cannot read {{{expression}}} in jsonpath template {template!r}")
    values = [document]
    for step in steps:
        values = _walk(values, step[1] if step[1] is not None else step[2], expression)
    return " ".join(_text(value) for value in values)


def _walk(values: Sequence[Any], key: str, expression: str) -> list[Any]:
    found = []
    for value in values:
        if key == "*":
            found += list(value.values()) if isinstance(value, dict) else list(value or [])
        elif isinstance(value, list) and re.fullmatch(r"-?[0-9]+", key):
            index = int(key)
            if not -len(value) <= index < len(value):
                raise JsonPathError(
                    f"{{{expression}}}: index {index} is out of range (the list has {len(value)})"
                )
            found.append(value[index])
        elif isinstance(value, dict) and key in value:
            found.append(value[key])
        else:
            raise JsonPathError(f"{{{expression}}}: {key} is not found")
    return found


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)
