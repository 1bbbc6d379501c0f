"""diskSpace: used percent of the filesystem at `mountpoint`, 100 x (1 - avail / size).

Each is averaged over timeRange when > 0; with several filesystems at the mountpoint the fullest counts.
max and pNN are taken of the available bytes, mirrored (the p90 of use is the p10 of available), over
their own samples: exact while the filesystem's size stays.
"""

from __future__ import annotations

from promsched.api.builtins import DEFAULT_MOUNTPOINT
from promsched.api.plugin_specs import PluginSpec
from promsched.metrics import promql
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins.interface import LoadPlugin, complement, used_percent


class DiskSpacePlugin(LoadPlugin):
    load_name = "disk space use"

    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        self.mountpoint = spec.mountpoint or DEFAULT_MOUNTPOINT
        super().__init__(spec, identity)

    def expression(self, by: str) -> str:
        at_mountpoint = promql.equals("mountpoint", self.mountpoint)
        seconds = self.time_range_seconds
        available = promql.summed_up_range(
            complement(self.percentile),
            promql.selector("node_filesystem_avail_bytes", at_mountpoint),
            seconds,
        )
        size = promql.over_range(
            "avg_over_time", promql.selector("node_filesystem_size_bytes", at_mountpoint), seconds
        )
        return used_percent(available, size, by)
