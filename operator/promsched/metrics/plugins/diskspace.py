"""diskSpace: used percent of the filesystem at `mountpoint`, 100 x (1 - avail / size).

Each is averaged over timeRange when > 0; with several filesystems at the mountpoint the fullest counts.
"""

from __future__ import annotations

from promsched.api.builtins import DEFAULT_MOUNTPOINT
from promsched.api.plugin_specs import PluginSpec
from promsched.metrics import promql
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins.interface import LoadPlugin, used_percent


class DiskSpacePlugin(LoadPlugin):
    load_name = "disk space use"

    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        self.mountpoint = spec.mountpoint or DEFAULT_MOUNTPOINT
        super().__init__(spec, identity)

    def expression(self, by: str) -> str:
        at_mountpoint = promql.equals("mountpoint", self.mountpoint)
        seconds = self.time_range_seconds
        available = promql.over_range(
            "avg_over_time", promql.selector("node_filesystem_avail_bytes", at_mountpoint), seconds
        )
        size = promql.over_range(
            "avg_over_time", promql.selector("node_filesystem_size_bytes", at_mountpoint), seconds
        )
        return used_percent(available, size, by)
