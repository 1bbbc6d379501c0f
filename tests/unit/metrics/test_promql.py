"""Safe PromQL building: hostile values never change a query's structure."""

from __future__ import annotations

import re
from typing import Any

import pytest

from promsched.api.plugin_specs import PluginSpec
from promsched.api.policies import NodeIdentitySource
from promsched.metrics import NodeIdentity, promql
from promsched.metrics.plugins import build_plugin

HOSTILE = [
    'a"b',
    "a\\b",
    "a\\",
    "a\nb",
    "tab\there",
    '"}',
    '"} or vector(1) or up{a="',
    'x\\"} or vector(1) #',
    ".*",
    "a|b",
    "(",
    ")",
    "^$",
    "[",
    "\\d+",
    "{2}",
    "`raw`",
    "'single'",
    "é-ü",
    "\u2028",
    "\x00",
    "\U000e0001",
]

_GO_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
}


def split_literals(query: str) -> tuple[str, list[str]]:
    """The query with each double-quoted literal replaced by "…", and the literals' decoded values.

    A small decoder of PromQL's (Go's) double-quoted strings; it fails on anything it does not know, so a
    query that only parses by accident fails the test.
    """
    skeleton: list[str] = []
    literals: list[str] = []
    index = 0
    while index < len(query):
        char = query[index]
        if char != '"':
            assert char.isprintable(), f"raw control character in {query!r}"
            skeleton.append(char)
            index += 1
            continue
        value: list[str] = []
        index += 1
        while query[index] != '"':
            if query[index] != "\\":
                assert query[index].isprintable(), f"raw control character in a literal of {query!r}"
                value.append(query[index])
                index += 1
                continue
            escape = query[index + 1]
            if escape in "uU":
                width = 4 if escape == "u" else 8
                value.append(chr(int(query[index + 2 : index + 2 + width], 16)))
                index += 2 + width
            else:
                value.append(_GO_ESCAPES[escape])
                index += 2
        literals.append("".join(value))
        skeleton.append('"…"')
        index += 1
    return "".join(skeleton), literals


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("eth0", '"eth0"'),
        ('a"b', '"a\\"b"'),
        ("a\\b", '"a\\\\b"'),
        ("a\nb", '"a\\u000ab"'),
        ("\x00", '"\\u0000"'),
        ("é", '"é"'),
        ("\U000e0001", '"\\U000e0001"'),
        ("", '""'),
    ],
)
def test_quote(value: str, literal: str) -> None:
    assert promql.quote(value) == literal
    assert split_literals(literal) == ('"…"', [value])


@pytest.mark.parametrize("value", HOSTILE)
def test_an_equality_matcher_keeps_its_shape(value: str) -> None:
    query = promql.selector("node_filesystem_avail_bytes", promql.equals("mountpoint", value))
    skeleton, literals = split_literals(query)
    assert skeleton == 'node_filesystem_avail_bytes{mountpoint="…"}'
    assert literals == [value]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_device_alternation_matches_exactly_its_names(name: str) -> None:
    query = promql.selector("m", promql.matches("device", promql.any_of([name, "eth0"])))
    skeleton, [regex] = split_literals(query)
    assert skeleton == 'm{device=~"…"}'
    for device in (name, "eth0"):
        assert re.fullmatch(regex, device)
    for other in ("", name + "x", "x" + name, "eth0" + name, "eth"):
        assert not re.fullmatch(regex, other), other


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_settings_cannot_change_a_plugin_query(name: str) -> None:
    # model_construct skips the API's own checks (which reject these names), to test this layer alone.
    identity = NodeIdentity(NodeIdentitySource.UNAME_NODENAME)

    def query(plugin: str, **settings: Any) -> str:
        spec = PluginSpec.model_construct(name=plugin, **settings)
        return build_plugin(spec, identity).query

    network, benign_network = query("network", devices=[name]), query("network", devices=["eth0"])
    assert split_literals(network)[0] == split_literals(benign_network)[0]
    # receive and transmit (the traffic), speed, the counted devices and their speeds again (which
    # nodes have a speed for each), and the counted devices for the bytes/s divisor
    assert split_literals(network)[1].count(promql.any_of([name])) == 6
    excluding = query("network", device_exclude_pattern=promql.regex_escape(name))
    assert split_literals(excluding)[0] == split_literals(query("network", device_exclude_pattern="lo"))[0]
    disk, benign_disk = query("diskSpace", mountpoint=name), query("diskSpace", mountpoint="/")
    assert split_literals(disk)[0] == split_literals(benign_disk)[0]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(300, "5m"), (90, "90s"), (60, "1m"), (3600, "1h"), (5400, "90m"), (0.5, "500ms"), (1.5, "1500ms")],
)
def test_duration(seconds: float, text: str) -> None:
    assert promql.duration(seconds) == text


def test_a_zero_range_is_the_instant_form() -> None:
    assert promql.over_range("avg_over_time", "m", 0) == "m"
    assert promql.over_range("avg_over_time", "m", 90) == "avg_over_time(m[90s])"
    with pytest.raises(ValueError, match="positive"):
        promql.duration(0)


@pytest.mark.parametrize(
    "pattern", ["sd[a-z]+|nvme[0-9]+n[0-9]+|vd[a-z]+", "[(?=]", r"\(\?=", r"\\1", "[]a]", "[^]a]x"]
)
def test_re2_compatible_patterns_pass(pattern: str) -> None:
    assert promql.checked_regex(pattern) == pattern


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("sd(?=a)", "RE2"),
        ("sd(?!a)", "RE2"),
        ("(?<=x)sd", "RE2"),
        (r"(a)\1", "RE2"),
        (r"sda\Z", "RE2"),
        ("(?>a)", "RE2"),
        ("a)|(b", "not a valid regular expression"),
        ("[a-", "not a valid regular expression"),
    ],
)
def test_patterns_re2_lacks_or_unbalanced_are_refused(pattern: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        promql.checked_regex(pattern)


@pytest.mark.parametrize("name", ["", "1abc", "a-b", 'a"', "a b", "a\n"])
def test_label_names_are_checked(name: str) -> None:
    with pytest.raises(ValueError, match="label name"):
        promql.label_name(name)


def test_with_label() -> None:
    assert promql.with_label("x", "unit", 'p"') == 'label_replace(x, "unit", "p\\"", "", "")'
