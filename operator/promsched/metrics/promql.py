"""Safe PromQL building: every value from a policy enters a query as a quoted, escaped literal.

A label value, device name or regex can contain quotes, backslashes or newlines; quoting them here means
none of them can end a string literal early and so change the query's structure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# Characters with a meaning in RE2 outside a character class.
_REGEX_SPECIALS = frozenset(r"\.+*?()|[]{}^$")
# Python-only constructs RE2 (Prometheus's regex engine) rejects: lookaround, atomic groups and
# conditionals after "(?", backreferences and \Z after a backslash.
_NOT_RE2_GROUPS = ("(?=", "(?!", "(?<=", "(?<!", "(?>", "(?(", "(?P=")
_NOT_RE2_ESCAPES = frozenset("123456789Z")
_UNIT_MILLIS = (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))
# A subquery evaluates its expression this often over its window: often enough that a burst of a scrape
# interval or two shows, few enough points to stay cheap at 5000 nodes.
MIN_STEP_SECONDS = 15.0
STEPS_PER_WINDOW = 20


def quote(value: str) -> str:
    """`value` as a double-quoted PromQL string literal (Go escaping), safe for any input."""
    parts = ['"']
    for char in value:
        if char in '"\\':
            parts.append("\\" + char)
        elif char.isprintable():
            parts.append(char)
        elif ord(char) > 0xFFFF:
            parts.append(f"\\U{ord(char):08x}")
        else:
            parts.append(f"\\u{ord(char):04x}")
    parts.append('"')
    return "".join(parts)


def label_name(name: str) -> str:
    """`name` if it is a valid label name (names cannot be quoted), else ValueError."""
    if not _LABEL_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)")
    return name


def metric_name(name: str) -> str:
    if not _METRIC_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a Prometheus metric name")
    return name


def regex_escape(text: str) -> str:
    """An RE2 regex matching exactly `text`.

    Only RE2's metacharacters are escaped (re.escape's output is not all valid RE2, e.g. ``\\ ``);
    control characters stay literal, which RE2 accepts, and `quote` escapes them in the literal.
    """
    return "".join("\\" + char if char in _REGEX_SPECIALS else char for char in text)


def _first_non_re2(pattern: str) -> str | None:
    index = 0
    in_class = False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            escaped = pattern[index + 1 : index + 2]
            if escaped and escaped in _NOT_RE2_ESCAPES and not in_class:
                return char + escaped
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            index += 1
            # A "]" first in a class ("[]a]", "[^]a]") is a member, not the class's end.
            index += pattern.startswith("^", index)
            index += pattern.startswith("]", index)
            continue
        elif char == "(":
            group = next((group for group in _NOT_RE2_GROUPS if pattern.startswith(group, index)), None)
            if group:
                return group
        index += 1
    return None


def checked_regex(pattern: str) -> str:
    """`pattern` if it compiles and uses nothing RE2 lacks, else ValueError with the reason.

    Prometheus wraps a matcher's regex as ``^(?:pattern)$``, so balanced parentheses (which compiling
    checks) also keep the anchoring intact.
    """
    try:
        re.compile(pattern)
    except re.error as error:
        raise ValueError(f"{pattern!r} is not a valid regular expression: {error}") from None
    unsupported = _first_non_re2(pattern)
    if unsupported:
        raise ValueError(f"{pattern!r} uses {unsupported!r}, which Prometheus's RE2 does not support")
    return pattern


def any_of(names: Iterable[str]) -> str:
    """An anchored alternation matching exactly one of `names`."""
    escaped = [regex_escape(name) for name in names]
    if not escaped:
        raise ValueError("any_of needs at least one name")
    return "^(?:" + "|".join(escaped) + ")$"


def duration(seconds: float) -> str:
    """A single-unit Prometheus duration (300 -> ``5m``, 90 -> ``90s``), a form every version accepts."""
    millis = round(seconds * 1000)
    if millis <= 0:
        raise ValueError(f"a range must be positive, not {seconds!r}s")
    unit, size = next((unit, size) for unit, size in _UNIT_MILLIS if millis % size == 0)
    return f"{millis // size}{unit}"


def selector(metric: str, *matchers: str) -> str:
    """``metric{matcher,...}``; build each matcher with `equals`, `matches` or `not_matches`."""
    inner = ",".join(matchers)
    return f"{metric_name(metric)}{{{inner}}}" if inner else metric_name(metric)


def equals(label: str, value: str) -> str:
    return f"{label_name(label)}={quote(value)}"


def matches(label: str, regex: str) -> str:
    return f"{label_name(label)}=~{quote(checked_regex(regex))}"


def not_matches(label: str, regex: str) -> str:
    return f"{label_name(label)}!~{quote(checked_regex(regex))}"


def over_range(function: str, series: str, seconds: float) -> str:
    """``function(series[range])``, or `series` itself when `seconds` is 0 (the instant value)."""
    return f"{function}({series}[{duration(seconds)}])" if seconds else series


def over_window(percentile: int | None, range_vector: str) -> str:
    """Each series of `range_vector` (``m[5m]`` or a subquery) summed up over its window: the mean for
    None, the lowest value for 0, the highest for 100, else that percentile."""
    if percentile is None:
        return f"avg_over_time({range_vector})"
    if percentile in (0, 100):
        return f"{'min' if percentile == 0 else 'max'}_over_time({range_vector})"
    return f"quantile_over_time({percentile / 100:g}, {range_vector})"


def summed_up_range(percentile: int | None, series: str, seconds: float) -> str:
    """`series` over the last `seconds` summed up as `over_window` says; `series` itself for 0."""
    return over_window(percentile, f"{series}[{duration(seconds)}]") if seconds else series


def subquery_step_seconds(seconds: float) -> float:
    return max(MIN_STEP_SECONDS, seconds / STEPS_PER_WINDOW)


def subquery(expression: str, seconds: float) -> str:
    """``(expression)[range:step]``: `expression` evaluated every step over the last `seconds`."""
    return f"({expression})[{duration(seconds)}:{duration(subquery_step_seconds(seconds))}]"


def with_label(expression: str, label: str, value: str) -> str:
    """`expression` with a constant label added (label_replace with an empty source matches always)."""
    return f'label_replace({expression}, {quote(label_name(label))}, {quote(value)}, "", "")'
