"""The SchedulingPolicy CustomResourceDefinition, generated from the pydantic models.

pydantic's JSON schema is turned into a structural OpenAPI v3 schema (refs inlined, no null branches,
no titles); patterns that have a hint become CEL rules carrying that hint as their message, and the
cross-field rules of the models are restated as CEL so the API server rejects what promsched would.
Regenerate the committed file with ``promsched crd > crds/schedulingpolicies.promsched.io.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel

from promsched.api import plugin_specs, policies
from promsched.api.builtins import (
    BUILTIN_PLUGIN_NAMES,
    NODE_MIXIN_RULES,
    PLUGIN_FIELD_OWNERS,
    BuiltinPlugin,
    MetricSource,
)
from promsched.api.estimations import Estimation
from promsched.api.fields import AVG_AGGREGATION, DURATION_PATTERN, PATTERN_HINTS
from promsched.api.plugin_specs import NormalizationType
from promsched.api.policies import NodeIdentitySource
from promsched.api.statuses import SchedulingPolicyStatus

CRD_NAME = f"{policies.PLURAL}.{policies.GROUP}"
CRD_FILE = f"crds/{CRD_NAME}.yaml"

_HEADER = (
    "# Generated from promsched.api.policies; do not edit. Regenerate with:\n"
    f"#   promsched crd > {CRD_FILE}\n"
)


def _cel_string(value: str) -> str:
    """A single-quoted CEL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _rule(
    rule: str, message: str, field_path: str | None = None, reason: str | None = None
) -> dict[str, str]:
    result = {"rule": rule, "message": message}
    if field_path is not None:
        result["fieldPath"] = field_path
    if reason is not None:
        result["reason"] = reason
    return result


def _duration_at_least(field: str, bound: str, strict: bool, message: str) -> dict[str, str]:
    # Guarded by the format so a malformed value gets only the format error, not an evaluation error.
    operator = ">" if strict else ">="
    rule = (
        f"!self.{field}.matches({_cel_string(DURATION_PATTERN)}) || "
        f"duration(self.{field}) {operator} duration({_cel_string(bound)})"
    )
    return _rule(rule, message, f".{field}", "FieldValueInvalid")


_BUILTINS = "[" + ", ".join(_cel_string(name) for name in BUILTIN_PLUGIN_NAMES) + "]"
_BUILTIN_LIST = ", ".join(BUILTIN_PLUGIN_NAMES)
_RULE_PLUGINS = "[" + ", ".join(_cel_string(name) for name in NODE_MIXIN_RULES) + "]"
_READS_RULES = f"has(self.source) && self.source == {_cel_string(MetricSource.RECORDING_RULES)}"


def _source_rules() -> list[dict[str, str]]:
    """The model's checks of `source` (PluginSpec._check_recording_rules_fit) as CEL."""
    network = _cel_string(BuiltinPlugin.NETWORK)
    return [
        _rule(
            f"!has(self.source) || self.name in {_BUILTINS}",
            "spec.plugins[].source applies to built-in plugins only; remove it from this plugin",
            ".source",
            "FieldValueForbidden",
        ),
        _rule(
            f"!({_READS_RULES}) || !(self.name in {_BUILTINS}) || self.name in {_RULE_PLUGINS}",
            "spec.plugins[].source RecordingRules: the node mixin records no rule for this plugin; "
            "remove source or set it to NodeExporter",
            ".source",
            "FieldValueInvalid",
        ),
        _rule(
            f"!({_READS_RULES} && self.name == {network}) || "
            "!(has(self.devices) || has(self.deviceExcludePattern) || has(self.threshold))",
            "spec.plugins[]: devices, deviceExcludePattern and threshold need source NodeExporter in "
            "plugin network: the node mixin's network rules give bytes/s summed over every device but "
            "lo; remove them or source",
            ".source",
            "FieldValueForbidden",
        ),
    ]


def _aggregation_rules() -> list[dict[str, str]]:
    """The model's checks of `aggregation` (PluginSpec._fields_fit_plugin) as CEL."""
    averaged = f"!has(self.aggregation) || self.aggregation == {_cel_string(AVG_AGGREGATION)}"
    return [
        _rule(
            f"!has(self.aggregation) || self.name in {_BUILTINS}",
            "spec.plugins[].aggregation applies to built-in plugins only; remove it from this plugin (a "
            "custom plugin's query says how it aggregates)",
            ".aggregation",
            "FieldValueForbidden",
        ),
        _rule(
            f"{averaged} || !has(self.timeRange) || !self.timeRange.matches({_cel_string(DURATION_PATTERN)})"
            " || duration(self.timeRange) > duration('0s')",
            "spec.plugins[].aggregation max or pNN needs a window: timeRange 0s reads one instant value; "
            "set timeRange (e.g. 5m) or aggregation avg",
            ".aggregation",
            "FieldValueInvalid",
        ),
    ]


# The rebalance hot threshold on the worse side of the placement threshold (_check_hot_past_placement).
_HOT_PAST_PLACEMENT = (
    "!has(self.rebalance) || !has(self.rebalance.thresholds) || self.rebalance.thresholds.all(t, "
    "self.plugins.all(p, p.name != t.plugin || !has(p.threshold) || "
    "((has(p.higherIsBetter) && p.higherIsBetter) ? double(t.hotThreshold) < double(p.threshold) "
    ": double(t.hotThreshold) > double(p.threshold))))"
)


def _header_rules() -> list[dict[str, str]]:
    """The model's checks of `headers` (PrometheusSpec._headers_of_our_own) as CEL."""
    reserved = ", ".join(_cel_string(name) for name in sorted(policies.RESERVED_HEADERS))
    return [
        _rule(
            "!has(self.headers) || self.headers.all(h, "
            "self.headers.exists_one(g, g.name.lowerAscii() == h.name.lowerAscii()))",
            "spec.prometheus.headers: each name at most once (names ignore case)",
            ".headers",
            "FieldValueDuplicate",
        ),
        _rule(
            f"!has(self.headers) || self.headers.all(h, !(h.name.lowerAscii() in [{reserved}]))",
            "spec.prometheus.headers: Accept, Accept-Encoding, Connection, Content-Length, Content-Type, "
            "Host and Transfer-Encoding are set by promsched's HTTP client itself",
            ".headers",
            "FieldValueForbidden",
        ),
        _rule(
            "!has(self.headers) || !has(self.auth) || "
            "!(has(self.auth.bearerToken) || has(self.auth.basicAuth)) || "
            "!self.headers.exists(h, h.name.lowerAscii() == 'authorization')",
            "spec.prometheus.headers: Authorization is set by auth.bearerToken or auth.basicAuth; set one",
            ".headers",
            "FieldValueForbidden",
        ),
    ]


def _plugin_rules() -> list[dict[str, str]]:
    rules = [
        _rule(
            f"self.name in {_BUILTINS} || has(self.query)",
            f"spec.plugins[].query is required for a custom plugin (a name other than {_BUILTIN_LIST}); "
            "set query or use a built-in name",
            ".query",
            "FieldValueRequired",
        ),
        _rule(
            f"!(self.name in {_BUILTINS}) || !has(self.query)",
            "spec.plugins[].query is not allowed for a built-in plugin; "
            "remove query or give the plugin a custom name",
            ".query",
            "FieldValueForbidden",
        ),
        # double(): a `number` may reach CEL as an int (threshold: 85), and int >= double has no overload.
        _rule(
            f"!has(self.threshold) || !(self.name in {_BUILTINS}) || "
            "(double(self.threshold) >= 0.0 && double(self.threshold) <= 100.0)",
            "spec.plugins[].threshold of a built-in plugin is a load percentage; use a value from 0 to 100",
            ".threshold",
            "FieldValueInvalid",
        ),
        _rule(
            "!(has(self.devices) && has(self.deviceExcludePattern))",
            "spec.plugins[]: set either devices (the devices to measure) or deviceExcludePattern "
            "(the devices to leave out), not both",
            ".deviceExcludePattern",
            "FieldValueForbidden",
        ),
        *_source_rules(),
        *_aggregation_rules(),
    ]
    for field, owner in PLUGIN_FIELD_OWNERS.items():
        if owner is None:
            condition, owner_text = f"!(self.name in {_BUILTINS})", "custom plugins"
        else:
            condition, owner_text = f"self.name == {_cel_string(owner)}", f"the {owner} plugin"
        rules.append(
            _rule(
                f"!has(self.{field}) || {condition}",
                f"spec.plugins[].{field} applies to {owner_text} only; remove it from this plugin",
                f".{field}",
                "FieldValueForbidden",
            )
        )
    return rules


# Cross-field rules, by the model they belong to (the $defs name pydantic gives it).
_MODEL_RULES: dict[str, list[dict[str, str]]] = {
    policies.SchedulingPolicySpec.__name__: [
        _rule(
            "self.plugins.exists(p, !has(p.weight) || p.weight > 0)",
            "spec.plugins: at least one plugin needs weight > 0; raise a weight",
            ".plugins",
            "FieldValueInvalid",
        ),
        _rule(
            "self.plugins.all(p, self.plugins.exists_one(q, q.name == p.name))",
            "spec.plugins: plugin names must be unique; rename or merge the duplicate entries",
            ".plugins",
            # Not FieldValueDuplicate: the API server drops the message for that reason.
            "FieldValueInvalid",
        ),
        _rule(
            _HOT_PAST_PLACEMENT,
            "spec.rebalance.thresholds[].hotThreshold must be above spec.plugins[].threshold of its plugin "
            "(below it where higherIsBetter): placement would still send pods to nodes that rebalancing "
            "counts as hot and empties again, in a loop; raise hotThreshold or lower threshold",
            ".rebalance",
            "FieldValueInvalid",
        ),
        _duration_at_least(
            "refreshInterval",
            "1s",
            False,
            "spec.refreshInterval must be at least 1s; e.g. refreshInterval: 15s",
        ),
        _duration_at_least(
            "staleAfter", "0s", True, "spec.staleAfter must be longer than 0s; e.g. staleAfter: 2m"
        ),
    ],
    policies.PrometheusSpec.__name__: [
        _duration_at_least(
            "timeout", "0s", True, "spec.prometheus.timeout must be longer than 0s; e.g. timeout: 5s"
        ),
        *_header_rules(),
    ],
    Estimation.__name__: [
        _duration_at_least(
            "window", "0s", True, "spec.estimation.window must be longer than 0s; e.g. window: 5m"
        ),
    ],
    policies.PrometheusAuth.__name__: [
        _rule(
            "!(has(self.bearerToken) && has(self.basicAuth))",
            "spec.prometheus.auth: set either bearerToken or basicAuth, not both",
            reason="FieldValueForbidden",
        ),
    ],
    policies.NodeIdentity.__name__: [
        _rule(
            f"self.source == {_cel_string(NodeIdentitySource.UNAME_NODENAME)} || has(self.label)",
            "spec.nodeIdentity.label is required when source is Label or InternalIP; e.g. label: instance",
            ".label",
            "FieldValueRequired",
        ),
    ],
    plugin_specs.Normalization.__name__: [
        _rule(
            f"self.type != {_cel_string(NormalizationType.ABSOLUTE)} || "
            "(has(self.min) && has(self.max) && double(self.min) < double(self.max))",
            "spec.plugins[].normalization: Absolute needs min and max with min < max; e.g. min: 0, max: 100",
            reason="FieldValueInvalid",
        ),
        _rule(
            f"self.type == {_cel_string(NormalizationType.ABSOLUTE)} || (!has(self.min) && !has(self.max))",
            "spec.plugins[].normalization: min and max apply to type Absolute only; remove them or set "
            "type: Absolute",
            reason="FieldValueForbidden",
        ),
    ],
    plugin_specs.PluginSpec.__name__: _plugin_rules(),
}

# The order of keys in each schema node; anything else follows alphabetically.
_KEY_ORDER = ("description", "type", "format", "enum", "default")


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _structural(node: Mapping[str, Any], definitions: Mapping[str, Any]) -> dict[str, Any]:
    """One pydantic JSON-schema node as a structural OpenAPI v3 schema node."""
    schema = {key: value for key, value in node.items() if key not in ("$ref", "anyOf", "title")}
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        # The referencing field's own description and default win over the model's.
        schema = {**_structural(definitions[name], definitions), **schema}
        if name in _MODEL_RULES:
            schema["x-kubernetes-validations"] = _MODEL_RULES[name]
    if "anyOf" in node:
        # `X | None`: an optional field is simply left out, so only X's schema is kept.
        branches = [branch for branch in node["anyOf"] if branch != {"type": "null"}]
        if len(branches) != 1:
            raise ValueError(
                f"cannot express a union of {len(branches)} types in a structural schema: {node}"
            )
        schema = {**_structural(branches[0], definitions), **schema}
    if schema.get("additionalProperties") is False:
        del schema["additionalProperties"]  # structural schemas prune unknown fields instead
    elif isinstance(schema.get("additionalProperties"), Mapping):  # a map's values, e.g. matchLabels
        schema["additionalProperties"] = _structural(schema["additionalProperties"], definitions)
    # Structural schemas cannot bound map keys; the operator's own validation checks them.
    schema.pop("propertyNames", None)
    if "default" in schema:
        schema["default"] = _without_nulls(schema["default"])
        if schema["default"] is None:
            del schema["default"]
    if "properties" in schema:
        schema["properties"] = {
            key: _structural(value, definitions) for key, value in schema["properties"].items()
        }
    if "items" in schema:
        schema["items"] = _structural(schema["items"], definitions)
    pattern = schema.get("pattern")
    if pattern in PATTERN_HINTS:
        # A CEL rule instead of `pattern`, so the API server's message says what to write.
        del schema["pattern"]
        rule = _rule(f"self.matches({_cel_string(pattern)})", PATTERN_HINTS[pattern])
        schema["x-kubernetes-validations"] = [rule, *schema.get("x-kubernetes-validations", [])]
    ordered = {key: schema[key] for key in _KEY_ORDER if key in schema}
    return ordered | {key: schema[key] for key in sorted(schema) if key not in ordered}


def openapi_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of one model, as the CRD embeds it."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.pop("$defs", {})
    return _structural({"$ref": f"#/$defs/{model.__name__}"}, {**definitions, model.__name__: raw})


def _printer_column(
    name: str, json_path: str, type_: str, description: str, priority: int = 0
) -> dict[str, Any]:
    column: dict[str, Any] = {"name": name, "type": type_, "jsonPath": json_path, "description": description}
    if priority:
        column["priority"] = priority
    return column


_PRINTER_COLUMNS = [
    _printer_column("Scheduler", ".spec.schedulerName", "string", "Pods with this schedulerName are ours."),
    _printer_column("Prometheus", ".spec.prometheus.url", "string", "The Prometheus queried."),
    _printer_column(
        "Ready", '.status.conditions[?(@.type=="Ready")].status', "string", "Whether the policy is in effect."
    ),
    _printer_column("Scheduled", ".status.scheduled", "integer", "Pods bound (or scored in Shadow mode)."),
    _printer_column(
        "Failed", ".status.unschedulableNow", "integer", "Pods unschedulable now: no node fits them."
    ),
    _printer_column("Last-Pod", ".status.lastDecision.pod", "string", "The pod of the latest decision."),
    _printer_column("Last-Node", ".status.lastDecision.node", "string", "The node of the latest decision."),
    _printer_column("Age", ".metadata.creationTimestamp", "date", "Time since creation."),
    _printer_column(
        "Failed-Total",
        ".status.unschedulable",
        "integer",
        "Pods that fitted no node at least once, each counted once (Failed: those failing now).",
        priority=1,
    ),
    _printer_column("Mode", ".spec.mode", "string", "Enforce or Shadow.", priority=1),
    _printer_column("Errors", ".status.errors", "integer", "Scheduling attempts that failed.", priority=1),
    _printer_column(
        "Observed-Gen", ".status.observedGeneration", "integer", "Generation promsched acted on.", priority=1
    ),
    _printer_column("Generation", ".metadata.generation", "integer", "Current generation.", priority=1),
    _printer_column("Rebalance", ".spec.rebalance.mode", "string", "Off, DryRun or Enforce.", priority=1),
    _printer_column(
        "Hot-Nodes",
        ".status.rebalance.hotNodeCount",
        "integer",
        "Nodes past a rebalance hot threshold for sustainedFor, in the latest cycle.",
        priority=1,
    ),
]


def render_crd() -> dict[str, Any]:
    """The CustomResourceDefinition (apiextensions.k8s.io/v1) as a dict."""
    root_schema = {
        "description": policies.SchedulingPolicy.__doc__,
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"description": "promsched.io/v1alpha1", "type": "string"},
            "kind": {"description": "SchedulingPolicy", "type": "string"},
            "metadata": {"type": "object"},
            "spec": openapi_schema(policies.SchedulingPolicySpec),
            "status": openapi_schema(SchedulingPolicyStatus),
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "labels": {"app.kubernetes.io/name": "promsched"}},
        "spec": {
            "group": policies.GROUP,
            "names": {
                "kind": policies.KIND,
                "listKind": f"{policies.KIND}List",
                "plural": policies.PLURAL,
                "singular": policies.SINGULAR,
                "shortNames": [policies.SHORT_NAME],
                "categories": ["promsched"],
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": policies.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": _PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": root_schema},
                }
            ],
        },
    }


class _NoAliasDumper(yaml.SafeDumper):
    """Writes repeated sub-schemas out in full: anchors and aliases would only confuse readers."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render_crd_yaml() -> str:
    """The CRD as YAML with a fixed key order, exactly as committed in crds/."""
    body = yaml.dump(render_crd(), Dumper=_NoAliasDumper, sort_keys=False, width=120, allow_unicode=False)
    return _HEADER + body
