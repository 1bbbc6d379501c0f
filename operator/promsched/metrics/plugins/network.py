"""network: receive + transmit bytes/s over the selected devices.

Where the node exports a link speed for them (`node_network_speed_bytes`, summed), the value is a percent
of it and scores absolutely like the other built-ins; traffic can exceed 100% on a full-duplex link and
is clamped there. Nodes without a speed keep bytes/s and are scaled relative to each other, and the
threshold (a percent) does not apply to them. One query serves both: each series says which it is in a
label. timeRange 0s uses a 1m rate window; no `devices` means every device but `lo`.
"""

from __future__ import annotations

from collections.abc import Mapping

from promsched.api.policies import PluginSpec
from promsched.metrics import promql
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins.interface import LoadPlugin, counter_window, relative_scores
from promsched.metrics.samples import Sample, Series

UNIT_LABEL = "promsched_unit"
PERCENT = "percent"
BYTES_PER_SECOND = "bytes_per_second"


class NetworkPlugin(LoadPlugin):
    load_name = "network load"

    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        self.devices = tuple(spec.devices or ())
        super().__init__(spec, identity)

    def expression(self, by: str) -> str:
        if self.devices:
            device = promql.matches("device", promql.any_of(self.devices))
        else:
            device = promql.not_equals("device", "lo")
        window = counter_window(self.time_range_seconds)

        def per_node_rate(metric: str) -> str:
            return f"sum by ({by}) (rate({promql.selector(metric, device)}[{window}]))"

        traffic = (
            f"({per_node_rate('node_network_receive_bytes_total')}"
            f" + {per_node_rate('node_network_transmit_bytes_total')})"
        )
        speed = f"(sum by ({by}) ({promql.selector('node_network_speed_bytes', device)}) > 0)"
        percent = promql.with_label(f"100 * {traffic} / {speed}", UNIT_LABEL, PERCENT)
        absolute = promql.with_label(traffic, UNIT_LABEL, BYTES_PER_SECOND)
        return f"{percent} or on({by}) {absolute}"

    def samples(self, by_node: Mapping[str, Series]) -> dict[str, Sample]:
        samples: dict[str, Sample] = {}
        unbounded: dict[str, Series] = {}
        for node, series in by_node.items():
            if series.labels.get(UNIT_LABEL) == PERCENT:
                samples[node] = self.load_sample(series.value, series.timestamp)
            else:
                unbounded[node] = series
        scores = relative_scores(
            {node: series.value for node, series in unbounded.items()}, higher_is_better=False
        )
        for node, series in unbounded.items():
            samples[node] = Sample(value=series.value, sample_time=series.timestamp, score=scores[node])
        return samples
