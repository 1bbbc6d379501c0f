"""A SchedulingPolicy's plugin entries (`spec.plugins[]`): which plugin, its weight, window and
threshold, the settings of each built-in, and a custom plugin's query and normalization.

Part of the SchedulingPolicy models (`promsched.api.policies`), kept apart for size.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from promsched.api.builtins import (
    BUILTIN_PLUGIN_NAMES,
    DEFAULT_DISK_DEVICE_PATTERN,
    DEFAULT_MOUNTPOINT,
    DEFAULT_NETWORK_DEVICE_EXCLUDE_PATTERN,
    NODE_MIXIN_RULES,
    PLUGIN_FIELD_OWNERS,
    BuiltinPlugin,
    MetricSource,
)
from promsched.api.fields import (
    AVG_AGGREGATION,
    MOUNTPOINT_PATTERN,
    NO_CONTROL_CHARS_PATTERN,
    PLUGIN_NAME_PATTERN,
    Aggregation,
    DeviceName,
    Duration,
    PrometheusLabel,
    SpecModel,
    aggregation_percentile,
    parse_duration,
)


class NormalizationType(StrEnum):
    ABSOLUTE = "Absolute"
    RELATIVE = "Relative"


class Normalization(SpecModel):
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


class PluginSpec(SpecModel):
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
    aggregation: Aggregation | None = Field(
        None,
        description="Built-ins only: how the node's value sums up timeRange. avg (the default): its "
        "mean. max: its highest value. pNN with NN in 1..99 (e.g. p90): its NNth percentile, so a node "
        "busy a tenth of the time scores as busy under p90, where avg averages its bursts away. Taken "
        "with max_over_time or quantile_over_time of the series (of a counter, its 1m rates stepped "
        "across timeRange in a subquery). max and pNN need a timeRange above 0s.",
    )
    threshold: float | None = Field(
        None,
        description="Nodes worse than this are filtered out. Built-ins: a load percentage 0..100 "
        "(cpu busy, memory used, disk busy, disk space used, network percent of link speed). "
        "Custom: a raw query value, on the worse side according to higherIsBetter.",
    )
    source: MetricSource | None = Field(
        None,
        description="Built-ins only: where the values come from. NodeExporter (the default): node_exporter's "
        "raw series over timeRange. RecordingRules: the node mixin's recorded series that "
        "kube-prometheus-stack evaluates anyway (cpu "
        f"{NODE_MIXIN_RULES[BuiltinPlugin.CPU][0]}, memory {NODE_MIXIN_RULES[BuiltinPlugin.MEMORY][0]}, "
        f"diskIO {NODE_MIXIN_RULES[BuiltinPlugin.DISK_IO][0]}, network "
        f"{' + '.join(NODE_MIXIN_RULES[BuiltinPlugin.NETWORK])}), averaged over timeRange: far cheaper for "
        "Prometheus, but their rates span 5m more, cpu counts iowait and steal as idle, network counts "
        "every device but lo in bytes/s (scored relative to other nodes), and diskSpace has no rule.",
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
            if self.reads_recording_rules:
                self._check_recording_rules_fit()
            if self.window_percentile is not None and self.time_range_seconds == 0:
                raise ValueError(
                    f"aggregation {self.aggregation} needs a window: timeRange 0s of plugin "
                    f"{self.name!r} reads one instant value; set timeRange (e.g. 5m) or aggregation "
                    f"{AVG_AGGREGATION}"
                )
        elif self.aggregation is not None:
            raise ValueError(
                f"aggregation applies to built-in plugins only; remove it from plugin {self.name!r} "
                "(a custom plugin's query says how it aggregates, e.g. with quantile_over_time)"
            )
        elif self.source is not None:
            raise ValueError(
                f"source applies to built-in plugins only; remove it from plugin {self.name!r} "
                "(a custom plugin's query says what it reads)"
            )
        elif self.query is None:
            raise ValueError(
                f"query is required for custom plugin {self.name!r} "
                f"(built-in names are {', '.join(BUILTIN_PLUGIN_NAMES)})"
            )
        return self

    def _check_recording_rules_fit(self) -> None:
        if self.name not in NODE_MIXIN_RULES:
            raise ValueError(
                f"source RecordingRules: the node mixin records no rule for plugin {self.name!r}; "
                "remove source or set it to NodeExporter"
            )
        if self.name == BuiltinPlugin.NETWORK:
            for field, value in (
                ("devices", self.devices),
                ("deviceExcludePattern", self.device_exclude_pattern),
                ("threshold", self.threshold),
            ):
                if value is not None:
                    raise ValueError(
                        f"{field} needs source NodeExporter in plugin 'network': the node mixin's network "
                        "rules give bytes/s summed over every device but lo; remove "
                        f"{field} or source"
                    )

    @property
    def is_builtin(self) -> bool:
        return self.name in BUILTIN_PLUGIN_NAMES

    @property
    def reads_recording_rules(self) -> bool:
        return self.source == MetricSource.RECORDING_RULES

    @property
    def window_percentile(self) -> int | None:
        """The percentile of timeRange the value takes (max: 100); None for the mean."""
        return aggregation_percentile(self.aggregation)

    @property
    def time_range_seconds(self) -> float:
        return parse_duration(self.time_range, f"plugins[{self.name}].timeRange")
