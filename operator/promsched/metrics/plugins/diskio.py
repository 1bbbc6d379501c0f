"""diskIO: busy percent of the busiest matching disk (the rate of io time, seconds per second).

timeRange 0s uses a 1m rate window (io time is a counter). max and pNN are each disk's, over its io time
rated over short windows across timeRange, and the busiest disk counts, as for the mean. devicePattern is
an RE2 regex over `device`; with source RecordingRules it selects among the node mixin's per-device rule
series.
"""

from __future__ import annotations

from promsched.api.builtins import DEFAULT_DISK_DEVICE_PATTERN
from promsched.api.plugin_specs import PluginSpec
from promsched.metrics import promql
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins.interface import LoadPlugin


class DiskIOPlugin(LoadPlugin):
    load_name = "disk busy"

    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        self.device_pattern = spec.device_pattern or DEFAULT_DISK_DEVICE_PATTERN
        super().__init__(spec, identity)

    def rule_matchers(self) -> tuple[str, ...]:
        return (promql.matches("device", self.device_pattern),)

    def expression(self, by: str) -> str:
        io_time = promql.selector("node_disk_io_time_seconds_total", *self.rule_matchers())
        return f"100 * max by ({by}) ({self.rated(lambda window: f'rate({io_time}[{window}])')})"
