"""The generated CRD: structural, documented, in step with the models and with the committed file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from promsched.api.crds import CRD_FILE, render_crd, render_crd_yaml
from promsched.api.fields import PATTERN_HINTS
from promsched.api.policies import SchedulingPolicySpec

REPO = Path(__file__).parents[3]
CRD = render_crd()
VERSION = CRD["spec"]["versions"][0]
ROOT = VERSION["schema"]["openAPIV3Schema"]
SPEC_SCHEMA = ROOT["properties"]["spec"]
FORBIDDEN_KEYS = {"$ref", "$defs", "anyOf", "allOf", "oneOf", "not", "title", "propertyNames"}


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if "items" in schema:
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")


def _rules(schema: dict[str, Any]) -> list[dict[str, str]]:
    return list(schema.get("x-kubernetes-validations", []))


def _cel_string_value(literal: str) -> str:
    return re.sub(r"\\(.)", r"\1", literal[1:-1])


def test_committed_crd_matches_the_models() -> None:
    committed = (REPO / CRD_FILE).read_text()

    assert render_crd_yaml() == committed, f"{CRD_FILE} is stale; run `promsched crd > {CRD_FILE}`"


def test_crd_names_and_scope() -> None:
    assert CRD["metadata"]["name"] == "schedulingpolicies.promsched.io"
    assert CRD["spec"]["scope"] == "Cluster"
    assert CRD["spec"]["names"]["shortNames"] == ["spol"]
    assert VERSION["name"] == "v1alpha1"
    assert VERSION["subresources"] == {"status": {}}


@pytest.mark.parametrize(("path", "node"), list(_nodes(ROOT)), ids=lambda value: str(value)[:60])
def test_schema_is_structural_and_bounded(path: str, node: dict[str, Any]) -> None:
    assert not FORBIDDEN_KEYS & node.keys(), f"{path} has {FORBIDDEN_KEYS & node.keys()}"
    # Only a map's value schema: a boolean (pydantic's extra=forbid) is not structural.
    assert isinstance(node.get("additionalProperties", {}), dict), (
        f"{path} has a boolean additionalProperties"
    )
    assert not ("additionalProperties" in node and "properties" in node), f"{path} mixes properties and a map"
    assert "type" in node, f"{path} has no type"
    assert node.get("default", 0) is not None, f"{path} defaults to null"
    if not path.startswith((".spec.", ".status.")):
        return  # apiVersion, kind and metadata are the API server's
    if node["type"] == "string":
        # Unbounded strings make CEL cost estimation reject the rules that read them.
        assert {"maxLength", "enum", "format"} & node.keys(), f"{path} has no maxLength"
    if node["type"] == "array":
        assert "maxItems" in node, f"{path} has no maxItems"
    if (
        not path.endswith(("[]", "{}")) or node["type"] == "object"
    ):  # scalar items are described by their list
        assert node.get("description"), f"{path} has no description for kubectl explain"


def test_optional_fields_are_not_nullable_or_required() -> None:
    plugin = SPEC_SCHEMA["properties"]["plugins"]["items"]

    assert plugin["required"] == ["name"]
    assert plugin["properties"]["query"]["type"] == "string"
    assert "nullable" not in plugin["properties"]["query"]


def _apply_schema_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """What the API server's defaulting does to `value` (enough of it for these schemas)."""
    if isinstance(value, dict):
        result = dict(value)
        for name, child in schema.get("properties", {}).items():
            if name not in result and "default" in child:
                result[name] = child["default"]
            if name in result:
                result[name] = _apply_schema_defaults(result[name], child)
        return result
    if isinstance(value, list):
        return [_apply_schema_defaults(item, schema["items"]) for item in value]
    return value


@pytest.mark.parametrize(
    "spec",
    [
        {"schedulerName": "p", "prometheus": {"url": "http://p:9090"}, "plugins": [{"name": "cpu"}]},
        {
            "schedulerName": "p",
            "prometheus": {"url": "https://p", "auth": {"basicAuth": {"namespace": "m", "name": "s"}}},
            "nodeIdentity": {"source": "Label", "label": "instance"},
            "plugins": [{"name": "gpu", "query": "up", "normalization": {"type": "Relative"}}],
        },
    ],
)
def test_schema_defaults_equal_model_defaults(spec: dict[str, Any]) -> None:
    assert _apply_schema_defaults(spec, SPEC_SCHEMA) == SchedulingPolicySpec.model_validate(spec).to_object()


@pytest.mark.parametrize(
    ("path", "node"),
    [(path, node) for path, node in _nodes(ROOT) if _rules(node)],
    ids=lambda value: str(value)[:60],
)
def test_cel_rules_name_real_fields_and_say_how_to_fix(path: str, node: dict[str, Any]) -> None:
    for rule in _rules(node):
        assert rule["message"], f"{path}: rule {rule['rule']} has no message"
        if "fieldPath" in rule:
            assert rule["fieldPath"].lstrip(".") in node["properties"], f"{path}: bad fieldPath {rule}"
        for field in re.findall(r"\bself\.(\w+)", rule["rule"]):
            if field != "matches":
                assert field in node["properties"], f"{path}: rule reads unknown self.{field}"
        for field in re.findall(r"\b[pq]\.(\w+)", rule["rule"]):  # the spec's rules over its plugins
            assert field in node["properties"]["plugins"]["items"]["properties"], f"{path}: unknown {field}"


def test_every_hinted_pattern_is_a_cel_rule_with_its_hint() -> None:
    rules = [rule for _, node in _nodes(ROOT) for rule in _rules(node)]
    pattern_rules = {
        _cel_string_value(match.group(1)): rule["message"]
        for rule in rules
        if (match := re.fullmatch(r"self\.matches\(('.*')\)", rule["rule"]))
    }

    used = {pattern: hint for pattern, hint in PATTERN_HINTS.items() if pattern in pattern_rules}
    assert used == {pattern: pattern_rules[pattern] for pattern in used}
    assert len(used) == len(PATTERN_HINTS), set(PATTERN_HINTS) - set(used)


def test_cross_field_rules_are_present() -> None:
    plugin_rules = " ".join(rule["rule"] for rule in _rules(SPEC_SCHEMA["properties"]["plugins"]["items"]))
    spec_rules = " ".join(rule["rule"] for rule in _rules(SPEC_SCHEMA))
    node_identity_rules = _rules(SPEC_SCHEMA["properties"]["nodeIdentity"])

    assert "p.weight > 0" in spec_rules
    assert "exists_one(q, q.name == p.name)" in spec_rules
    assert "has(self.query)" in plugin_rules
    assert "!has(self.devices) || self.name == 'network'" in plugin_rules
    assert node_identity_rules[0]["fieldPath"] == ".label"


def test_plugins_merge_by_name_under_server_side_apply() -> None:
    plugins = SPEC_SCHEMA["properties"]["plugins"]

    assert plugins["x-kubernetes-list-type"] == "map"
    assert plugins["x-kubernetes-list-map-keys"] == ["name"]


def test_printer_columns() -> None:
    columns = {column["name"]: column for column in VERSION["additionalPrinterColumns"]}

    assert list(columns)[:8] == [
        "Scheduler",
        "Prometheus",
        "Ready",
        "Scheduled",
        "Failed",
        "Last-Pod",
        "Last-Node",
        "Age",
    ]
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert all(column.get("priority") == 1 for column in list(columns.values())[8:])
    assert {"Mode", "Errors", "Observed-Gen"} <= set(columns)


@pytest.mark.parametrize(
    "column", [c for c in VERSION["additionalPrinterColumns"] if not c["jsonPath"].startswith(".metadata")]
)
def test_printer_columns_point_at_schema_fields(column: dict[str, str]) -> None:
    node = ROOT
    for part in column["jsonPath"].split("[")[0].strip(".").split("."):
        node = node["properties"][part]
    assert node["type"] == column["type"] or column["type"] == "string"


def test_rendered_yaml_has_no_anchors_and_loads_back() -> None:
    text = render_crd_yaml()

    assert "&id" not in text
    assert yaml.safe_load(text) == CRD
