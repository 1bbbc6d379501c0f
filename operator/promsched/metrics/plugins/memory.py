"""memory: used percent, 100 x (1 - MemAvailable / MemTotal), each averaged over timeRange when > 0.

max and pNN are taken of MemAvailable, mirrored (the highest use is the lowest available, the p90 of use
the p10 of available), over its own samples: exact, since MemTotal does not change.
"""

from __future__ import annotations

from promsched.metrics import promql
from promsched.metrics.plugins.interface import LoadPlugin, complement, used_percent


class MemoryPlugin(LoadPlugin):
    load_name = "memory use"

    def expression(self, by: str) -> str:
        seconds = self.time_range_seconds
        available = promql.summed_up_range(
            complement(self.percentile), "node_memory_MemAvailable_bytes", seconds
        )
        total = promql.over_range("avg_over_time", "node_memory_MemTotal_bytes", seconds)
        return used_percent(available, total, by)
