"""memory: used percent, 100 x (1 - MemAvailable / MemTotal), each averaged over timeRange when > 0.

max and pNN are taken of MemAvailable, mirrored (the highest use is the lowest available, the p90 of use
the p10 of available), over its own samples: exact, since MemTotal does not change.

From node_exporter's series the query is sent in two parts (`dividing`): MemAvailable every refresh,
MemTotal once per staleAfter.
"""

from __future__ import annotations

from promsched.api.plugin_specs import PluginSpec
from promsched.metrics import promql
from promsched.metrics.dividing import used_percent_split
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins.interface import LoadPlugin, complement, used_percent


class MemoryPlugin(LoadPlugin):
    load_name = "memory use"

    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        super().__init__(spec, identity)
        if not self.reads_recording_rules:
            by = promql.label_name(self.identity.node_label)
            self.split = used_percent_split(self._available(), self._total(), by, self.identity.node_label)

    def expression(self, by: str) -> str:
        return used_percent(self._available(), self._total(), by)

    def _available(self) -> str:
        return promql.summed_up_range(
            complement(self.percentile), "node_memory_MemAvailable_bytes", self.time_range_seconds
        )

    def _total(self) -> str:
        return promql.over_range("avg_over_time", "node_memory_MemTotal_bytes", self.time_range_seconds)
