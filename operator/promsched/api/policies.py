"""SchedulingPolicy v1alpha1: the pydantic models that define the resource (docs/policy-contract.md).

The models are the single source of truth: the CRD schema (`promsched.api.crds`) is generated from them,
and the operator validates every object it reads through them. Attributes are snake_case; on the wire
(Kubernetes objects, YAML) fields are camelCase, e.g. ``plugin.time_range`` is ``timeRange``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

GROUP = "promsched.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "SchedulingPolicy"
PLURAL = "schedulingpolicies"
SINGULAR = "schedulingpolicy"
SHORT_NAME = "spol"


class BuiltinPlugin(StrEnum):
    """Plugins promsched implements itself over node_exporter series; any other name is a custom plugin."""

    CPU = "cpu"
    MEMORY = "memory"
    DISK_IO = "diskIO"
    DISK_SPACE = "diskSpace"
    NETWORK = "network"


BUILTIN_PLUGIN_NAMES: tuple[str, ...] = tuple(plugin.value for plugin in BuiltinPlugin)

# What a built-in uses when the policy leaves the field unset (kept out of the schema's `default`
# because each applies to one plugin only).
DEFAULT_DISK_DEVICE_PATTERN = "sd[a-z]+|nvme[0-9]+n[0-9]+|vd[a-z]+|xvd[a-z]+"
DEFAULT_MOUNTPOINT = "/"
# Network devices the network plugin leaves out unless the policy says otherwise: everything but the
# node's physical NICs. Each pod's veth (and the bridges, tunnels and overlays it is routed through)
# carries traffic the physical NIC counts already, and would add its own 10 Gb/s "link speed".
# Collected from node_exporter setups of real fleets (kube-prometheus excludes veth.* and 15-hex-char
# names; the node and kubernetes mixins lo, veth, docker, flannel, cali, cbr, cni and br).
DEFAULT_NETWORK_DEVICE_EXCLUSIONS: tuple[tuple[str, str], ...] = (
    ("lo", "loopback"),
    ("veth.*", "pod veth pairs (most CNIs, Docker, Weave)"),
    ("cali.*", "Calico pod interfaces"),
    ("lxc.*", "Cilium pod interfaces"),
    ("eni[0-9a-f]+", "AWS VPC CNI pod interfaces (EKS)"),
    ("gke[0-9a-f]+", "GKE pod interfaces"),
    ("azv.*", "Azure CNI pod interfaces (AKS)"),
    ("enP.*", "Hyper-V accelerated-networking VFs, which carry eth0's traffic (AKS)"),
    ("[0-9a-f]{15}", "OVN-Kubernetes pod interfaces (container ID prefixes)"),
    ("antrea-.*|cilium_.*|flannel.*|cni.*|cbr.*|weave.*|datapath|kube-.*|nodelocaldns", "CNI devices"),
    ("docker.*|br.*|virbr.*|ovs-.*|ovn-.*", "bridges and virtual switches"),
    ("vxlan.*|genev.*|gre.*|ip6gre.*|erspan.*|ip6tnl.*|sit.*|ip_vti.*|ip6_vti.*", "tunnels and overlays"),
    ("tun.*|tap.*|wg.*|tailscale.*|zt.*", "VPN devices"),
    ("bond.*|team.*|.+[.].+", "bonds, teams and VLANs, over NICs counted already"),
    ("dummy.*|ifb.*|nlmon.*", "dummy, traffic-shaping and netlink-monitor devices"),
)
DEFAULT_NETWORK_DEVICE_EXCLUDE_PATTERN = "|".join(pattern for pattern, _ in DEFAULT_NETWORK_DEVICE_EXCLUSIONS)

# Fields a plugin entry may set only for some plugins: wire name -> the plugins that accept it, where
# None means "custom plugins". Both the model validator and the CRD's CEL rules are generated from this.
PLUGIN_FIELD_OWNERS: dict[str, str | None] = {
    "devices": BuiltinPlugin.NETWORK,
    "deviceExcludePattern": BuiltinPlugin.NETWORK,
    "devicePattern": BuiltinPlugin.DISK_IO,
    "mountpoint": BuiltinPlugin.DISK_SPACE,
    "nodeLabel": None,
    "higherIsBetter": None,
    "normalization": None,
}


class Mode(StrEnum):
    ENFORCE = "Enforce"
    SHADOW = "Shadow"


class NodeIdentitySource(StrEnum):
    UNAME_NODENAME = "UnameNodename"
    LABEL = "Label"
    INTERNAL_IP = "InternalIP"


class OnMissingMetrics(StrEnum):
    IGNORE = "Ignore"
    NEUTRAL = "Neutral"
    UNSCHEDULABLE = "Unschedulable"


class NormalizationType(StrEnum):
    ABSOLUTE = "Absolute"
    RELATIVE = "Relative"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionType(StrEnum):
    """The condition types promsched writes to status.conditions."""

    READY = "Ready"
    PROMETHEUS_REACHABLE = "PrometheusReachable"
    METRICS_COMPLETE = "MetricsComplete"
    CONFLICT = "Conflict"


# --- Durations -----------------------------------------------------------------------------------

# Go's time.ParseDuration syntax without sign, µs or a bare 0: one or more <number><unit>.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"
DURATION_MAX_LENGTH = 32
_DURATION_RE = re.compile(DURATION_PATTERN)
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_HINT = "must be a Go duration, e.g. 500ms, 5s, 1m30s, 2h or 0s"


def _duration_seconds(value: str) -> float:
    if len(value) > DURATION_MAX_LENGTH or not _DURATION_RE.fullmatch(value):
        raise ValueError(f"{value!r} {_DURATION_HINT}")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART_RE.findall(value))


def parse_duration(value: str, field: str = "duration") -> float:
    """Seconds in a Go-style duration (``1m30s`` -> 90.0); ValueError naming `field` otherwise."""
    try:
        return _duration_seconds(value)
    except ValueError as error:
        raise ValueError(f"{field}: {error}") from None


def _check_duration(value: str) -> str:
    _duration_seconds(value)
    return value


Duration = Annotated[
    str,
    AfterValidator(_check_duration),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN, "maxLength": DURATION_MAX_LENGTH}),
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

DnsSubdomain = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
DnsLabel = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
PrometheusLabel = Annotated[str, Field(min_length=1, max_length=128, pattern=PROMETHEUS_LABEL_PATTERN)]
SecretKey = Annotated[str, Field(min_length=1, max_length=253, pattern=SECRET_KEY_PATTERN)]
DeviceName = Annotated[str, Field(min_length=1, max_length=64, pattern=DEVICE_NAME_PATTERN)]
NodeName = Annotated[str, Field(max_length=253)]
ShortText = Annotated[str, Field(max_length=1024)]

# Patterns with the hint shown when a value does not match: used in pydantic's errors and as the
# message of the CRD's CEL rule for that pattern, so kubectl and promsched say the same thing.
PATTERN_HINTS = {
    DURATION_PATTERN: _DURATION_HINT,
    URL_PATTERN: "must be an http:// or https:// URL, e.g. http://prometheus.monitoring:9090",
    DNS_SUBDOMAIN_PATTERN: "must be a lowercase DNS subdomain (a-z, 0-9, '-' and '.'), e.g. promsched",
    DNS_LABEL_PATTERN: "must be a lowercase DNS label (a-z, 0-9 and '-'), e.g. monitoring",
    PROMETHEUS_LABEL_PATTERN: "must be a Prometheus label name (letters, digits, '_'), e.g. instance",
    SECRET_KEY_PATTERN: "must be a Secret key (letters, digits, '-', '_' and '.'), e.g. token",
    PLUGIN_NAME_PATTERN: "must start with a letter and use only letters, digits, '-' and '_', e.g. gpu",
    DEVICE_NAME_PATTERN: "must be a device name of letters, digits, '_', '.', ':' and '-', e.g. eth0",
    MOUNTPOINT_PATTERN: "must be an absolute path of letters, digits, '_', '.', '-' and '/', e.g. /var",
    NO_CONTROL_CHARS_PATTERN: "must not contain control characters such as newlines or tabs",
}


_ModelT = TypeVar("_ModelT", bound=BaseModel)


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


class _ApiModel(BaseModel):
    """Frozen, camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, alias_generator=to_camel)

    def to_object(self) -> dict[str, Any]:
        """The wire form (camelCase, JSON types, unset optionals left out), ready for the API server."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class _SpecModel(_ApiModel):
    # Unknown spec fields are mistakes (a typo silently ignored would change scheduling), so reject them.
    model_config = ConfigDict(extra="forbid")


class _StatusModel(_ApiModel):
    # Status is written by promsched; tolerate what other writers (or newer versions) add.
    model_config = ConfigDict(extra="ignore")


# --- Spec ----------------------------------------------------------------------------------------


class SecretKeyRef(_SpecModel):
    """A key in a Secret."""

    namespace: DnsLabel = Field(description="Namespace of the Secret.")
    name: DnsSubdomain = Field(description="Name of the Secret.")
    key: SecretKey = Field(description="Key in the Secret's data that holds the value.")


class BasicAuthRef(_SpecModel):
    """A Secret holding an HTTP basic-auth username and password."""

    namespace: DnsLabel = Field(description="Namespace of the Secret.")
    name: DnsSubdomain = Field(description="Name of the Secret.")
    username_key: SecretKey = Field("username", description="Key in the Secret that holds the username.")
    password_key: SecretKey = Field("password", description="Key in the Secret that holds the password.")


class PrometheusAuth(_SpecModel):
    """How promsched authenticates to Prometheus and verifies its certificate."""

    bearer_token: SecretKeyRef | None = Field(
        None, description="Secret key holding a bearer token sent as 'Authorization: Bearer'."
    )
    basic_auth: BasicAuthRef | None = Field(
        None, description="Secret holding a basic-auth username and password. Exclusive with bearerToken."
    )
    ca: SecretKeyRef | None = Field(
        None,
        description="Secret key holding PEM CA certificates that sign the Prometheus server certificate.",
    )
    insecure_skip_verify: bool = Field(
        False, description="Skip TLS certificate verification. For testing only."
    )

    @model_validator(mode="after")
    def _one_credential(self) -> PrometheusAuth:
        if self.bearer_token is not None and self.basic_auth is not None:
            raise ValueError("set either bearerToken or basicAuth, not both")
        return self


class PrometheusSpec(_SpecModel):
    """The Prometheus server whose node metrics drive scoring."""

    url: str = Field(
        max_length=2048,
        pattern=URL_PATTERN,
        description="Base URL of the Prometheus HTTP API, http:// or https://, e.g. http://prometheus:9090.",
    )
    timeout: Duration = Field("5s", description="Timeout of one Prometheus query (Go duration).")
    auth: PrometheusAuth | None = Field(None, description="Credentials and TLS settings; none by default.")

    @model_validator(mode="after")
    def _positive_timeout(self) -> PrometheusSpec:
        if self.timeout_seconds <= 0:
            raise ValueError("timeout must be longer than 0s")
        return self

    @property
    def timeout_seconds(self) -> float:
        return parse_duration(self.timeout, "prometheus.timeout")


class NodeIdentity(_SpecModel):
    """How a Prometheus series is matched to a Kubernetes node."""

    source: NodeIdentitySource = Field(
        NodeIdentitySource.UNAME_NODENAME,
        description=(
            "UnameNodename: join node_uname_info on instance and use its nodename label. "
            "Label: a series label holds the node name (a :port suffix is stripped). "
            "InternalIP: a series label holds the node's InternalIP address (a :port suffix is stripped)."
        ),
    )
    label: PrometheusLabel | None = Field(
        None,
        description="Label that holds the node name (Label) or address (InternalIP), e.g. instance. "
        "Required unless source is UnameNodename.",
    )

    @model_validator(mode="after")
    def _label_when_needed(self) -> NodeIdentity:
        if self.source != NodeIdentitySource.UNAME_NODENAME and self.label is None:
            raise ValueError(f"label is required when source is {self.source.value}; e.g. label: instance")
        return self


class Normalization(_SpecModel):
    """How a custom plugin's raw values become scores from 0 to 100."""

    type: NormalizationType = Field(
        description="Absolute: min..max maps linearly onto 0..100 (values outside are clamped). "
        "Relative: the lowest and highest value across nodes map onto 0..100."
    )
    min: float | None = Field(
        None, description="Absolute only: the raw value that scores 0 (before direction)."
    )
    max: float | None = Field(
        None, description="Absolute only: the raw value that scores 100 (before direction)."
    )

    @model_validator(mode="after")
    def _bounds(self) -> Normalization:
        if self.type == NormalizationType.ABSOLUTE:
            if self.min is None or self.max is None or self.min >= self.max:
                raise ValueError(
                    "Absolute normalization needs min and max with min < max, e.g. min: 0, max: 100"
                )
        elif self.min is not None or self.max is not None:
            raise ValueError(
                "min and max apply to Absolute normalization only; remove them or use type: Absolute"
            )
        return self


class PluginSpec(_SpecModel):
    """One scoring plugin: a built-in (cpu, memory, diskIO, diskSpace, network) or a custom PromQL query."""

    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=PLUGIN_NAME_PATTERN,
        description="cpu, memory, diskIO, diskSpace or network select a built-in plugin; "
        "any other name is a custom plugin and must set query.",
    )
    weight: int = Field(
        1, ge=0, le=100, description="Weight of this plugin's score in the node's total (0 disables scoring)."
    )
    time_range: Duration = Field(
        "5m",
        description="Window the metric is averaged (or, for counters, rated) over, as a Go duration; "
        "0s uses the instant value.",
    )
    threshold: float | None = Field(
        None,
        description="Nodes worse than this are filtered out. Built-ins: a load percentage 0..100 "
        "(cpu busy, memory used, disk busy, disk space used, network percent of link speed). "
        "Custom: a raw query value, on the worse side according to higherIsBetter.",
    )
    devices: list[DeviceName] | None = Field(
        None,
        max_length=16,
        description="network only: network device names to measure, e.g. [eth0] (default: every device "
        "deviceExcludePattern leaves). Exclusive with deviceExcludePattern.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    device_exclude_pattern: str | None = Field(
        None,
        max_length=512,
        pattern=NO_CONTROL_CHARS_PATTERN,
        description="network only: RE2 regular expression over the device label of the devices left out "
        'when devices is unset; "" leaves none out. The default keeps physical NICs only, leaving out '
        "loopback, pod veths, CNI, bridge, tunnel, VPN and bond devices: "
        f"{DEFAULT_NETWORK_DEVICE_EXCLUDE_PATTERN}",
    )
    device_pattern: str | None = Field(
        None,
        max_length=256,
        pattern=NO_CONTROL_CHARS_PATTERN,
        description="diskIO only: RE2 regular expression over the device label "
        f"(default {DEFAULT_DISK_DEVICE_PATTERN}).",
    )
    mountpoint: str | None = Field(
        None,
        max_length=256,
        pattern=MOUNTPOINT_PATTERN,
        description=f"diskSpace only: filesystem mount point to measure (default {DEFAULT_MOUNTPOINT}).",
    )
    query: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="Custom plugins only (required there): PromQL returning one series per node.",
    )
    node_label: PrometheusLabel | None = Field(
        None,
        description="Custom plugins only: the query's label that holds the node name (a :port suffix is "
        "stripped). Default: matched through spec.nodeIdentity.",
    )
    higher_is_better: bool | None = Field(
        None, description="Custom plugins only: true if larger values mean a better node (default false)."
    )
    normalization: Normalization | None = Field(
        None, description="Custom plugins only: how raw values become 0..100 scores (default Relative)."
    )

    @model_validator(mode="after")
    def _fields_fit_plugin(self) -> PluginSpec:
        wire = self.to_object()
        for field, owner in PLUGIN_FIELD_OWNERS.items():
            if field in wire and (self.is_builtin if owner is None else self.name != owner):
                allowed = "custom plugins" if owner is None else f"the {owner} plugin"
                raise ValueError(f"{field} applies to {allowed} only; remove it from plugin {self.name!r}")
        if self.is_builtin:
            if self.query is not None:
                raise ValueError(
                    f"query is not allowed for built-in plugin {self.name!r}; "
                    "remove it, or give the plugin a custom name"
                )
            if self.threshold is not None and not 0 <= self.threshold <= 100:
                raise ValueError(f"threshold of built-in plugin {self.name!r} is a percentage, 0..100")
            if self.devices is not None and self.device_exclude_pattern is not None:
                raise ValueError(
                    "set either devices (the devices to measure) or deviceExcludePattern (the devices "
                    f"to leave out), not both, in plugin {self.name!r}"
                )
        elif self.query is None:
            raise ValueError(
                f"query is required for custom plugin {self.name!r} "
                f"(built-in names are {', '.join(BUILTIN_PLUGIN_NAMES)})"
            )
        return self

    @property
    def is_builtin(self) -> bool:
        return self.name in BUILTIN_PLUGIN_NAMES

    @property
    def time_range_seconds(self) -> float:
        return parse_duration(self.time_range, f"plugins[{self.name}].timeRange")


DEFAULT_PREFERENCE_WEIGHT = 50


class PlacementPreferences(_SpecModel):
    """How much a pod's own placement preferences weigh against node load."""

    weight: int = Field(
        DEFAULT_PREFERENCE_WEIGHT,
        ge=0,
        le=100,
        description="Percent of a node's total that comes from the pod's placement preferences, the rest "
        "from the plugins' load score: total = load x (100 - weight)% + preferences x weight%. Preferences "
        "are preferred node affinity, PreferNoSchedule taints, ScheduleAnyway topology spread constraints "
        "and preferred inter-pod (anti-)affinity, each scored 0..100 on the feasible nodes as "
        "kube-scheduler scores it and averaged with kube's plugin weights (TaintToleration 3, the others "
        "2). Only preferences that tell the feasible nodes apart count: a pod without preferred affinities "
        "or soft spreading, among nodes without PreferNoSchedule taints, is ranked by load alone. 0 ignores "
        "preferences; 100 ranks by preferences alone.",
    )


class SchedulingPolicySpec(_SpecModel):
    """Which pods promsched schedules, where their node metrics come from, and how nodes are scored."""

    scheduler_name: DnsSubdomain = Field(
        description="Pods whose spec.schedulerName equals this are scheduled (or, in Shadow mode, scored) "
        "by this policy."
    )
    mode: Mode = Field(
        Mode.ENFORCE,
        description="Enforce: bind pods to the best node. "
        "Shadow: score pods that another scheduler places and record the decision; bind nothing.",
    )
    prometheus: PrometheusSpec = Field(description="The Prometheus server to query.")
    node_identity: NodeIdentity = Field(
        NodeIdentity(), description="How Prometheus series are matched to nodes."
    )
    refresh_interval: Duration = Field(
        "15s", description="How often the metric snapshot is rebuilt (Go duration, at least 1s)."
    )
    stale_after: Duration = Field(
        "2m", description="A sample older than this counts as missing (Go duration, more than 0s)."
    )
    on_missing_metrics: OnMissingMetrics = Field(
        OnMissingMetrics.NEUTRAL,
        description="When a node has no sample for a plugin: Ignore leaves the plugin out of that node's "
        "total, Neutral scores it 50, Unschedulable filters the node out.",
    )
    decision_history: int = Field(
        10, ge=0, le=50, description="How many recent decisions status.recentDecisions keeps."
    )
    plugins: list[PluginSpec] = Field(
        min_length=1,
        max_length=20,
        description="Scoring plugins, unique by name; at least one needs weight > 0.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    placement_preferences: PlacementPreferences = Field(
        PlacementPreferences(),
        description="How much the pods' placement preferences (preferred affinities, PreferNoSchedule "
        "taints, soft topology spread) weigh against node load.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> SchedulingPolicySpec:
        names = [plugin.name for plugin in self.plugins]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"plugins: names must be unique; {', '.join(duplicates)} appear more than once")
        if not any(plugin.weight > 0 for plugin in self.plugins):
            raise ValueError("plugins: at least one plugin needs weight > 0")
        if self.refresh_interval_seconds < 1:
            raise ValueError("refreshInterval must be at least 1s")
        if self.stale_after_seconds <= 0:
            raise ValueError("staleAfter must be longer than 0s")
        return self

    @property
    def refresh_interval_seconds(self) -> float:
        return parse_duration(self.refresh_interval, "refreshInterval")

    @property
    def stale_after_seconds(self) -> float:
        return parse_duration(self.stale_after, "staleAfter")

    def plugin(self, name: str) -> PluginSpec | None:
        return next((plugin for plugin in self.plugins if plugin.name == name), None)


# --- Status --------------------------------------------------------------------------------------


class Condition(_StatusModel):
    """A metav1.Condition-shaped observation; promsched writes the types in ConditionType."""

    type: str = Field(max_length=316, description="Condition type, e.g. Ready.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        max_length=1024, pattern=REASON_PATTERN, description="CamelCase reason for the last transition."
    )
    message: str = Field("", max_length=32768, description="Human-readable detail.")
    last_transition_time: datetime = Field(description="When status last changed.")
    observed_generation: int | None = Field(
        None, ge=0, description="metadata.generation the condition was computed for."
    )


def set_condition(conditions: Sequence[Condition], new: Condition) -> list[Condition]:
    """`conditions` with `new` in place of its type; the transition time is kept if status did not change."""
    result = []
    replaced = False
    for condition in conditions:
        if condition.type != new.type:
            result.append(condition)
            continue
        replaced = True
        if condition.status == new.status:
            new = new.model_copy(update={"last_transition_time": condition.last_transition_time})
        result.append(new)
    return result if replaced else [*result, new]


def find_condition(conditions: Sequence[Condition], condition_type: str) -> Condition | None:
    return next((condition for condition in conditions if condition.type == condition_type), None)


class PluginScore(_StatusModel):
    """One plugin's part in a node's score."""

    name: str = Field(max_length=63, description="Plugin name.")
    raw: float | None = Field(None, description="The metric value (absent when the node had no sample).")
    score: float | None = Field(None, description="Normalized score 0..100 before weighting.")


class NodeScore(_StatusModel):
    """A candidate node and its weighted total."""

    node: NodeName = Field(description="Node name.")
    total: float = Field(description="Weighted score 0..100.")
    plugins: list[PluginScore] = Field(default_factory=list, max_length=20, description="Per-plugin scores.")


class FilteredCount(_StatusModel):
    """How many nodes were filtered out for one reason."""

    reason: ShortText = Field(description="Why the nodes were filtered, e.g. threshold of cpu exceeded.")
    count: int = Field(ge=0, description="Number of nodes.")


class Decision(_StatusModel):
    """What promsched decided for one pod."""

    pod: str = Field(max_length=317, description="The pod, as namespace/name.")
    node: NodeName | None = Field(None, description="The chosen node; absent when no node fitted.")
    time: datetime = Field(description="When the decision was made.")
    latency_ms: float = Field(ge=0, description="Milliseconds from pod seen to decision.")
    generation: int = Field(ge=0, description="metadata.generation of the policy that decided.")
    mode: Mode = Field(description="The policy mode at decision time.")
    top_nodes: list[NodeScore] = Field(
        default_factory=list, max_length=3, description="The three best-scoring nodes."
    )
    filtered: list[FilteredCount] = Field(
        default_factory=list, max_length=32, description="Nodes filtered out, by reason."
    )


class PreflightQuery(_StatusModel):
    """One plugin query as tried at preflight."""

    plugin: str = Field(max_length=63, description="Plugin name.")
    query: str = Field(max_length=8192, description="The PromQL sent.")
    ok: bool = Field(description="Whether the query succeeded.")
    error: ShortText | None = Field(None, description="The error, when it failed.")


class MissingSeries(_StatusModel):
    """Nodes a plugin found no series for."""

    plugin: str = Field(max_length=63, description="Plugin name.")
    nodes: list[NodeName] = Field(
        default_factory=list, max_length=20, description="The first 20 nodes without a series."
    )
    count: int = Field(ge=0, description="How many nodes had no series.")


class Preflight(_StatusModel):
    """The result of checking every plugin query against Prometheus."""

    checked_at: datetime = Field(description="When the check ran.")
    queries: list[PreflightQuery] = Field(
        default_factory=list, max_length=20, description="Per-plugin results."
    )
    missing_series: list[MissingSeries] = Field(
        default_factory=list, max_length=20, description="Plugins with nodes that have no series."
    )


class SchedulingPolicyStatus(_StatusModel):
    """What promsched observed and decided; written by promsched only."""

    observed_generation: int | None = Field(
        None, ge=0, description="metadata.generation that promsched last acted on."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Ready, PrometheusReachable, MetricsComplete and Conflict.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    scheduled: int = Field(0, ge=0, description="Pods bound (Enforce) or scored (Shadow).")
    unschedulable: int = Field(
        0, ge=0, description="Pods that fitted no node at least once; each pod is counted once."
    )
    unschedulable_now: int = Field(
        0, ge=0, description="Pods waiting now because no node fits them (as of the last status write)."
    )
    errors: int = Field(0, ge=0, description="Scheduling attempts that failed with an error.")
    last_decision: Decision | None = Field(None, description="The most recent decision.")
    recent_decisions: list[Decision] = Field(
        default_factory=list, max_length=50, description="The latest decisions, newest first."
    )
    preflight: Preflight | None = Field(None, description="The latest query preflight check.")


# --- The resource --------------------------------------------------------------------------------


def _parse(model: type[_ModelT], data: Any, root: str) -> _ModelT:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise PolicyError(format_validation_error(error, root)) from None


def parse_spec(spec: Mapping[str, Any]) -> SchedulingPolicySpec:
    """Validate an object's ``spec`` (e.g. from a Kopf handler); PolicyError lists ``spec.*`` fields."""
    return _parse(SchedulingPolicySpec, spec, "spec")


def parse_status(status: Mapping[str, Any] | None) -> SchedulingPolicyStatus:
    """Validate an object's ``status``; an absent status is the empty one."""
    return _parse(SchedulingPolicyStatus, status or {}, "status")


class SchedulingPolicy(_SpecModel):
    """A SchedulingPolicy object as the API server stores it."""

    api_version: Literal["promsched.io/v1alpha1"] = Field(
        "promsched.io/v1alpha1", description="promsched.io/v1alpha1"
    )
    kind: Literal["SchedulingPolicy"] = Field("SchedulingPolicy", description="SchedulingPolicy")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Standard object metadata.")
    spec: SchedulingPolicySpec = Field(description="The desired scheduling behaviour.")
    status: SchedulingPolicyStatus | None = Field(None, description="Observed state, written by promsched.")

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> SchedulingPolicy:
        """Validate a whole object (dict from YAML or the API); PolicyError names each bad field path."""
        return _parse(cls, obj, "")

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def generation(self) -> int:
        return int(self.metadata.get("generation", 0))
