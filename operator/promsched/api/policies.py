"""SchedulingPolicy v1alpha1: the pydantic models that define the resource (docs/policy-contract.md).

The models are the single source of truth: the CRD schema (`promsched.api.crds`) is generated from them,
and the operator validates every object it reads through them. Attributes are snake_case; on the wire
(Kubernetes objects, YAML) fields are camelCase, e.g. ``plugin.time_range`` is ``timeRange``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    Field,
    model_validator,
)

from promsched.api.estimations import Estimation
from promsched.api.fields import (
    URL_PATTERN,
    DnsLabel,
    DnsSubdomain,
    Duration,
    Mode,
    PrometheusLabel,
    SecretKey,
    SpecModel,
    parse_duration,
    parse_model,
)
from promsched.api.plugin_specs import PluginSpec
from promsched.api.rebalances import RebalanceSpec, RebalanceThreshold
from promsched.api.statuses import SchedulingPolicyStatus

GROUP = "promsched.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "SchedulingPolicy"
PLURAL = "schedulingpolicies"
SINGULAR = "schedulingpolicy"
SHORT_NAME = "spol"


class NodeIdentitySource(StrEnum):
    UNAME_NODENAME = "UnameNodename"
    LABEL = "Label"
    INTERNAL_IP = "InternalIP"


class OnMissingMetrics(StrEnum):
    IGNORE = "Ignore"
    NEUTRAL = "Neutral"
    REQUESTS = "Requests"
    UNSCHEDULABLE = "Unschedulable"


# --- Spec ----------------------------------------------------------------------------------------


class SecretKeyRef(SpecModel):
    """A key in a Secret."""

    namespace: DnsLabel = Field(description="Namespace of the Secret.")
    name: DnsSubdomain = Field(description="Name of the Secret.")
    key: SecretKey = Field(description="Key in the Secret's data that holds the value.")


class BasicAuthRef(SpecModel):
    """A Secret holding an HTTP basic-auth username and password."""

    namespace: DnsLabel = Field(description="Namespace of the Secret.")
    name: DnsSubdomain = Field(description="Name of the Secret.")
    username_key: SecretKey = Field("username", description="Key in the Secret that holds the username.")
    password_key: SecretKey = Field("password", description="Key in the Secret that holds the password.")


class PrometheusAuth(SpecModel):
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


# Headers the HTTP client sets itself, or whose meaning is the request's framing: never from a Secret.
RESERVED_HEADERS = frozenset(
    {"accept", "accept-encoding", "connection", "content-length", "content-type", "host", "transfer-encoding"}
)
HEADER_NAME_PATTERN = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"  # an HTTP token (RFC 9110)


class PrometheusHeader(SpecModel):
    """One HTTP header sent with every query, its value read from a Secret (e.g. Mimir's
    X-Scope-OrgID, or a proxy's own token)."""

    name: str = Field(
        min_length=1, max_length=128, pattern=HEADER_NAME_PATTERN, description="The header's name."
    )
    value_from: SecretKeyRef = Field(description="Secret key holding the header's value.")


class PrometheusSpec(SpecModel):
    """The Prometheus server whose node metrics drive scoring."""

    url: str = Field(
        max_length=2048,
        pattern=URL_PATTERN,
        description="Base URL of the Prometheus HTTP API, http:// or https://, e.g. http://prometheus:9090.",
    )
    timeout: Duration = Field("5s", description="Timeout of one Prometheus query (Go duration).")
    auth: PrometheusAuth | None = Field(None, description="Credentials and TLS settings; none by default.")
    headers: list[PrometheusHeader] | None = Field(
        None,
        max_length=8,
        description="HTTP headers sent with every query, each value from a Secret, read again before each "
        "query as the credentials are: e.g. X-Scope-OrgID for Grafana Mimir or Cortex. Not the headers "
        "the client sets itself (Accept, Content-Type, Host, ...), nor Authorization when auth sets a "
        "credential.",
    )

    @model_validator(mode="after")
    def _positive_timeout(self) -> PrometheusSpec:
        if self.timeout_seconds <= 0:
            raise ValueError("timeout must be longer than 0s")
        return self

    @model_validator(mode="after")
    def _headers_of_our_own(self) -> PrometheusSpec:
        names = [header.name.lower() for header in self.headers or ()]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"headers: {', '.join(repeated)} named more than once (names ignore case)")
        reserved = sorted(set(names) & RESERVED_HEADERS)
        if reserved:
            raise ValueError(f"headers: {', '.join(reserved)} is set by promsched's HTTP client itself")
        auth = self.auth
        if "authorization" in names and auth is not None and (auth.bearer_token or auth.basic_auth):
            raise ValueError("headers: Authorization is set by auth.bearerToken or auth.basicAuth; set one")
        return self

    @property
    def timeout_seconds(self) -> float:
        return parse_duration(self.timeout, "prometheus.timeout")


class NodeIdentity(SpecModel):
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


DEFAULT_PREFERENCE_WEIGHT = 50


class PlacementPreferences(SpecModel):
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


class SchedulingPolicySpec(SpecModel):
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
        "total, Neutral scores it 50, Requests scores cpu and memory by the share of the node its pods "
        "request (as kube-scheduler's LeastAllocated does) and other plugins 50, Unschedulable filters "
        "the node out.",
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
    estimation: Estimation = Field(
        Estimation(),
        description="How much CPU and memory an incoming pod is expected to use, counted where the herd "
        "adjustment and the cpu and memory thresholds count a pod: its siblings' observed usage, else "
        "a rule over its requests.",
    )
    placement_preferences: PlacementPreferences = Field(
        PlacementPreferences(),
        description="How much the pods' placement preferences (preferred affinities, PreferNoSchedule "
        "taints, soft topology spread) weigh against node load.",
    )
    rebalance: RebalanceSpec = Field(
        RebalanceSpec(),
        description="Moving pods off nodes that stay hot, judged by this policy's own plugins "
        "(off by default).",
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
        for index, threshold in enumerate(self.rebalance.thresholds):
            path = f"rebalance.thresholds[{index}]"
            _check_rebalance_threshold(threshold, self.plugin(threshold.plugin), path)
            _check_hot_past_placement(threshold, self.plugins, path)
        return self

    @property
    def refresh_interval_seconds(self) -> float:
        return parse_duration(self.refresh_interval, "refreshInterval")

    @property
    def stale_after_seconds(self) -> float:
        return parse_duration(self.stale_after, "staleAfter")

    def plugin(self, name: str) -> PluginSpec | None:
        return next((plugin for plugin in self.plugins if plugin.name == name), None)


def _check_rebalance_threshold(threshold: RebalanceThreshold, plugin: PluginSpec | None, path: str) -> None:
    """A threshold names one of the policy's plugins, on that plugin's scale, with the target on the
    better side of the hot threshold."""
    if plugin is None:
        raise ValueError(
            f"{path}.plugin: {threshold.plugin!r} is not in spec.plugins; name one of its plugins"
        )
    if plugin.is_builtin:
        for name, value in (
            ("hotThreshold", threshold.hot_threshold),
            ("targetThreshold", threshold.target_threshold),
        ):
            if not 0 <= value <= 100:
                raise ValueError(f"{path}.{name}: plugin {plugin.name!r} is a percentage, 0..100")
    higher_is_better = bool(plugin.higher_is_better)
    better = (
        threshold.target_threshold > threshold.hot_threshold
        if higher_is_better
        else (threshold.target_threshold < threshold.hot_threshold)
    )
    if not better:
        side = "above" if higher_is_better else "below"
        raise ValueError(
            f"{path}.targetThreshold: must be {side} hotThreshold ({threshold.hot_threshold:g}) for plugin "
            f"{plugin.name!r}; the gap between them keeps moved pods from coming back"
        )


def _check_hot_past_placement(threshold: RebalanceThreshold, plugins: list[PluginSpec], path: str) -> None:
    """A hot threshold on the worse side of the plugin's placement threshold: otherwise placement fills
    nodes that rebalancing then empties, and the pods go round in a loop."""
    index, plugin = next((i, p) for i, p in enumerate(plugins) if p.name == threshold.plugin)
    if plugin.threshold is None:
        return
    hot, placement = threshold.hot_threshold, plugin.threshold
    higher_is_better = bool(plugin.higher_is_better)
    if hot < placement if higher_is_better else hot > placement:
        return
    side, fix_hot, fix_placement = (
        ("below", "lower", "raise") if higher_is_better else ("above", "raise", "lower")
    )
    raise ValueError(
        f"{path}.hotThreshold ({hot:g}) must be {side} spec.plugins[{index}].threshold ({placement:g}) of "
        f"plugin {plugin.name!r}: placement would still send pods to a node at {placement:g}, which "
        f"rebalancing counts as hot and empties again, in a loop; {fix_hot} hotThreshold or "
        f"{fix_placement} threshold"
    )


# --- The resource --------------------------------------------------------------------------------


def parse_spec(spec: Mapping[str, Any]) -> SchedulingPolicySpec:
    """Validate an object's ``spec`` (e.g. from a Kopf handler); PolicyError lists ``spec.*`` fields."""
    return parse_model(SchedulingPolicySpec, spec, "spec")


class SchedulingPolicy(SpecModel):
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
        return parse_model(cls, obj, "")

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def generation(self) -> int:
        return int(self.metadata.get("generation", 0))
