"""cpu: busy percent, 100 x (1 - the average idle rate over all CPUs) over timeRange.

timeRange 0s uses a 1m rate window: CPU time is a counter and has no instant value. With source
RecordingRules it is the node mixin's 5m utilisation (iowait and steal count as idle there) averaged
over timeRange.
"""

from __future__ import annotations

from promsched.api.builtins import NODE_MIXIN_RATE_SECONDS
from promsched.metrics import promql
from promsched.metrics.plugins.interface import INSTANT_COUNTER_WINDOW_SECONDS, LoadPlugin, counter_window


class CpuPlugin(LoadPlugin):
    load_name = "cpu load"

    def expression(self, by: str) -> str:
        idle = promql.selector("node_cpu_seconds_total", promql.equals("mode", "idle"))
        window = counter_window(self.time_range_seconds)
        return f"100 * (1 - avg by ({by}) (rate({idle}[{window}])))"

    @property
    def window_seconds(self) -> float:
        if self.reads_recording_rules:
            return self.time_range_seconds + NODE_MIXIN_RATE_SECONDS
        return self.time_range_seconds or INSTANT_COUNTER_WINDOW_SECONDS
