"""network: receive + transmit bytes/s over the node's physical NICs (or the devices the policy names).

By default every device `deviceExcludePattern` leaves out (pod veths, CNI, bridges, tunnels; see
DEFAULT_NETWORK_DEVICE_EXCLUSIONS) is not counted: their traffic passes a physical NIC too. Each
device's series are de-duplicated (max) before the node's sum, so two node_exporter pods scraped at
once while their DaemonSet rolls (series that differ only in `pod`) cannot double the traffic.

Where every counted device exports a link speed (`node_network_speed_bytes` above 0: node_exporter
reports -1 for virtio NICs and bridges, which means unknown), the value is a percent of their summed
speeds and scores absolutely like the other built-ins; traffic can exceed 100% on a full-duplex link
and is clamped there. Nodes with any device of unknown speed keep bytes/s and are scaled relative to
each other, and the threshold (a percent) does not apply to them. One query serves both: each series
says which it is in a label. timeRange 0s uses a 1m rate window; max and pNN are taken of the node's
traffic rated over short windows across timeRange.

With source RecordingRules the node mixin's receive and transmit rules (every device but lo, 5m rates)
are averaged over timeRange and added (max and pNN: their sum's, across timeRange): bytes/s for every
node, scaled relative to each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from promsched.api.builtins import DEFAULT_NETWORK_DEVICE_EXCLUDE_PATTERN, NODE_MIXIN_RULES
from promsched.api.plugin_specs import PluginSpec
from promsched.metrics import promql
from promsched.metrics.dividing import SplitQuery
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.offloading import paced
from promsched.metrics.plugins.interface import NO_LABELS, LoadPlugin, relative_scores
from promsched.metrics.samples import Sample, Series

UNIT_LABEL = "promsched_unit"
PERCENT = "percent"
_IN_PERCENT: Mapping[str, str] = MappingProxyType({UNIT_LABEL: PERCENT})
BYTES_PER_SECOND = "bytes_per_second"


class NetworkPlugin(LoadPlugin):
    load_name = "network load"

    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        self.devices = tuple(spec.devices or ())
        self.exclude_pattern = (
            DEFAULT_NETWORK_DEVICE_EXCLUDE_PATTERN
            if spec.device_exclude_pattern is None
            else spec.device_exclude_pattern
        )
        super().__init__(spec, identity)
        if not self.reads_recording_rules:
            # Sent as its traffic and, no more often than staleAfter needs, its link speeds (`dividing`).
            by = promql.label_name(self.identity.node_label)
            self.split = SplitQuery(
                self._traffic(by), self._per_unit(by), self.identity.node_label, UNIT_LABEL
            )

    def expression(self, by: str) -> str:
        return f"{self._traffic(by)} / on({by}) group_left({UNIT_LABEL}) ({self._per_unit(by)})"

    def _device(self) -> str:
        if self.devices:
            return promql.matches("device", promql.any_of(self.devices))
        return promql.not_matches("device", self.exclude_pattern)

    def _traffic(self, by: str) -> str:
        device = self._device()
        per_device = f"{by}, device"

        def traffic_over(window: str) -> str:
            def device_rate(metric: str) -> str:
                return f"max by ({per_device}) (rate({promql.selector(metric, device)}[{window}]))"

            receive, transmit = (
                device_rate("node_network_receive_bytes_total"),
                device_rate("node_network_transmit_bytes_total"),
            )
            return f"sum by ({by}) ({receive} + {transmit})"

        return self.rated(traffic_over)

    def _per_unit(self, by: str) -> str:
        """What each node's traffic is divided by, labelled with the unit it gives: a hundredth of its
        link speed (a percent), else 1 (bytes/s)."""
        device = self._device()
        per_device = f"{by}, device"
        speed_series = promql.selector("node_network_speed_bytes", device)
        device_speed = f"(max by ({per_device}) ({speed_series}) > 0)"
        counted = promql.selector("node_network_receive_bytes_total", device)
        # Only nodes whose every counted device has a speed: a partial sum would overstate the load. (Set
        # operators match many-to-many, so these sides need no de-duplication.)
        unknown_speed = f"({counted} unless on({per_device}) {speed_series} > 0)"
        hundredth_of_speed = f"(sum by ({by}) {device_speed} unless on({by}) {unknown_speed}) / 100"
        # The rates, the costly part, are taken once: a fifth less of Prometheus's CPU than computing the
        # traffic for each unit (bench.query_cost's figures in the commit).
        return (
            f"{promql.with_label(hundredth_of_speed, UNIT_LABEL, PERCENT)} or on({by})"
            f" {promql.with_label(f'group by ({by}) ({counted})', UNIT_LABEL, BYTES_PER_SECOND)}"
        )

    def rule_expression(self, by: str) -> str:
        receive, transmit = NODE_MIXIN_RULES[self.name]
        seconds = self.time_range_seconds
        if self.percentile is None:  # the sum of the means is the mean of the sum

            def averaged(rule: str) -> str:
                return f"max by ({by}) ({promql.summed_up_range(None, rule, seconds)})"

            traffic = f"{averaged(receive)} + {averaged(transmit)}"
        else:  # the highest (or NNth percentile) of the node's sum, not the sum of each direction's
            node_traffic = f"max by ({by}) ({receive}) + max by ({by}) ({transmit})"
            traffic = promql.over_window(self.percentile, promql.subquery(node_traffic, seconds))
        return promql.with_label(traffic, UNIT_LABEL, BYTES_PER_SECOND)

    def labels_read(self, sample: Sample) -> Mapping[str, str]:
        return _IN_PERCENT if sample.is_load_percent else NO_LABELS

    def samples(self, by_node: Mapping[str, Series]) -> dict[str, Sample]:
        samples: dict[str, Sample] = {}
        unbounded: dict[str, Series] = {}
        for node, series in paced(by_node.items()):
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
