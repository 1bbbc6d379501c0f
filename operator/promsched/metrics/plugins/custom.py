"""Custom plugins: the user's PromQL, one series per node.

The node is read from `nodeLabel` (port stripped) when set, else through the policy's nodeIdentity (for
UnameNodename from the `instance` label, looked up in node_uname_info, so the query must keep it).
Scores follow `normalization` (default Relative) and `higherIsBetter` (default false); the threshold is
a raw value, filtering nodes on the worse side of it.
"""

from __future__ import annotations

from collections.abc import Mapping

from promsched.api.plugin_specs import NormalizationType, PluginSpec
from promsched.api.policies import NodeIdentitySource
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins.interface import Plugin, clamp_percent, relative_scores
from promsched.metrics.samples import Sample, Series


class CustomPlugin(Plugin):
    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        if spec.query is None:
            raise ValueError(f"custom plugin {spec.name!r} has no query")
        self.user_query = spec.query
        self.higher_is_better = bool(spec.higher_is_better)
        normalization = spec.normalization
        # (min, max) for Absolute normalization; None for Relative, the default.
        self.absolute_range: tuple[float, float] | None = None
        if normalization is not None and normalization.type is NormalizationType.ABSOLUTE:
            if normalization.min is None or normalization.max is None:
                raise ValueError(f"custom plugin {spec.name!r}: Absolute normalization needs min and max")
            self.absolute_range = (normalization.min, normalization.max)
        if spec.node_label is not None:
            identity = NodeIdentity(NodeIdentitySource.LABEL, spec.node_label)
        super().__init__(spec, identity)

    def build_query(self) -> str:
        return self.user_query

    def _scores(self, values: Mapping[str, float]) -> dict[str, float]:
        if self.absolute_range is None:
            return relative_scores(values, higher_is_better=self.higher_is_better)
        low, high = self.absolute_range
        span = high - low
        scores = {node: clamp_percent(100.0 * (value - low) / span) for node, value in values.items()}
        if self.higher_is_better:
            return scores
        return {node: 100.0 - score for node, score in scores.items()}

    def _over_threshold(self, value: float) -> bool:
        if self.threshold is None:
            return False
        return value < self.threshold if self.higher_is_better else value > self.threshold

    def samples(self, by_node: Mapping[str, Series]) -> dict[str, Sample]:
        scores = self._scores({node: series.value for node, series in by_node.items()})
        return {
            node: Sample(
                value=series.value,
                sample_time=series.timestamp,
                score=scores[node],
                over_threshold=self._over_threshold(series.value),
            )
            for node, series in by_node.items()
        }

    @property
    def threshold_reason(self) -> str:
        side = "below" if self.higher_is_better else "above"
        return f"{self.name} {side} {self.threshold:g}"

    def describe(self, value: float) -> str:
        return f"{self.name} {value:g}"
