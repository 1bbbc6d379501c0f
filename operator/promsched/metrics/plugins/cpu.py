"""cpu: busy percent, 100 x (1 - the average idle rate over all CPUs) over timeRange.

timeRange 0s uses a 1m rate window: CPU time is a counter and has no instant value. max and pNN take the
node's busy percent rated over short windows across timeRange. With source RecordingRules it is the node
mixin's 5m utilisation (iowait and steal count as idle there) summed up over timeRange.
"""

from __future__ import annotations

from promsched.api.builtins import NODE_MIXIN_RATE_SECONDS
from promsched.metrics import promql
from promsched.metrics.plugins.interface import INSTANT_COUNTER_WINDOW_SECONDS, LoadPlugin


class CpuPlugin(LoadPlugin):
    load_name = "cpu load"

    def expression(self, by: str) -> str:
        idle = promql.selector("node_cpu_seconds_total", promql.equals("mode", "idle"))
        return self.rated(lambda window: f"100 * (1 - avg by ({by}) (rate({idle}[{window}])))")

    @property
    def window_seconds(self) -> float:
        showing = self.showing_seconds(self.time_range_seconds)
        if self.reads_recording_rules:
            return showing + NODE_MIXIN_RATE_SECONDS
        if self.percentile is None:
            return showing or INSTANT_COUNTER_WINDOW_SECONDS
        return showing + self.step_rate_seconds
