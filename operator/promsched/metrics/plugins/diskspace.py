"""diskSpace: used percent of the filesystem at `mountpoint`, 100 x (1 - avail / size).

Each is averaged over timeRange when > 0; with several filesystems at the mountpoint the fullest counts.
max and pNN are taken of the available bytes, mirrored (the p90 of use is the p10 of available), over
their own samples: exact while the filesystem's size stays.

The query is sent in two parts (`dividing`): the available bytes of each filesystem (device, fstype)
every refresh, their sizes once per staleAfter.
"""

from __future__ import annotations

from promsched.api.builtins import DEFAULT_MOUNTPOINT
from promsched.api.plugin_specs import PluginSpec
from promsched.metrics import promql
from promsched.metrics.dividing import used_percent_split
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins.interface import LoadPlugin, complement, used_percent

# What tells the filesystems at one mountpoint apart.
FILESYSTEM_LABELS = ("device", "fstype")


class DiskSpacePlugin(LoadPlugin):
    load_name = "disk space use"

    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        self.mountpoint = spec.mountpoint or DEFAULT_MOUNTPOINT
        super().__init__(spec, identity)
        by = promql.label_name(self.identity.node_label)
        self.split = used_percent_split(
            self._available(), self._size(), by, self.identity.node_label, per=FILESYSTEM_LABELS
        )

    def expression(self, by: str) -> str:
        return used_percent(self._available(), self._size(), by)

    def _at_mountpoint(self, metric: str) -> str:
        return promql.selector(metric, promql.equals("mountpoint", self.mountpoint))

    def _available(self) -> str:
        return promql.summed_up_range(
            complement(self.percentile),
            self._at_mountpoint("node_filesystem_avail_bytes"),
            self.time_range_seconds,
        )

    def _size(self) -> str:
        return promql.over_range(
            "avg_over_time", self._at_mountpoint("node_filesystem_size_bytes"), self.time_range_seconds
        )
