"""What every plugin provides: one query for all nodes, and scores from its per-node results.

Scores run from 0 to 100, higher is better. Where the raw value is a percentage the score is absolute
(100 - load%), so 1% and 2% CPU score 99 and 98, not 100 and 50. Only unbounded values are scaled
relative to the other nodes (min-max); when all such values are equal every node scores
`ALL_EQUAL_SCORE`: no node is worse than another.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

from promsched.api.builtins import NODE_MIXIN_RULES
from promsched.api.plugin_specs import PluginSpec
from promsched.metrics import promql
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.samples import Sample, Series

ALL_EQUAL_SCORE = 100.0
# A counter has no instant value: rate() needs a window. timeRange 0s ("instant", as the original
# plugins had it) rates counters over this short window instead.
INSTANT_COUNTER_WINDOW_SECONDS = 60.0


def clamp_percent(value: float) -> float:
    # Comparisons, not min(max()): this runs for every node and plugin at each refresh.
    return 0.0 if value < 0.0 else 100.0 if value > 100.0 else value


def relative_scores(values: Mapping[str, float], *, higher_is_better: bool) -> dict[str, float]:
    """Min-max scaling across nodes: the best node scores 100, the worst 0."""
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    if high == low:
        return dict.fromkeys(values, ALL_EQUAL_SCORE)
    span = high - low
    if higher_is_better:
        return {node: 100.0 * (value - low) / span for node, value in values.items()}
    return {node: 100.0 * (high - value) / span for node, value in values.items()}


def counter_window(seconds: float) -> str:
    """The rate() range for a counter: the plugin's timeRange, or the short default for 0s."""
    return promql.duration(seconds or INSTANT_COUNTER_WINDOW_SECONDS)


def used_percent(available: str, total: str, by: str) -> str:
    """Percent of `total` not `available`, per series, then the worst series per `by` value."""
    return f"100 * max by ({by}) (1 - {available} / ({total} > 0))"


class Plugin(ABC):
    """A plugin compiled from its policy entry: `query` is the exact text sent on every refresh."""

    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        self.name = spec.name
        self.weight = spec.weight
        self.threshold = spec.threshold
        self.time_range_seconds = spec.time_range_seconds
        self.identity = identity
        # Subclasses set their own settings before calling this, so the query can use them.
        self.query = self.build_query()

    @abstractmethod
    def build_query(self) -> str:
        """The PromQL giving one series per node, as `identity` maps them."""

    @abstractmethod
    def samples(self, by_node: Mapping[str, Series]) -> dict[str, Sample]:
        """Each node's value, score and threshold verdict."""

    @property
    @abstractmethod
    def threshold_reason(self) -> str:
        """The filter reason for nodes past the threshold; equal for all nodes so reasons aggregate."""

    @abstractmethod
    def describe(self, value: float) -> str:
        """A raw value as a reader would like it in a filter reason (``cpu load 91%``)."""

    @property
    def window_seconds(self) -> float:
        """How many seconds of the past the value averages over (0: an instant value)."""
        return self.time_range_seconds

    def with_extra_load(self, sample: Sample, percent: float) -> Sample:
        """`sample` as if the node carried `percent` more load; unchanged where that has no meaning."""
        return sample

    def crosses_threshold(self, value: float, percent: float) -> bool:
        """Whether `value` with `percent` more load is past the threshold (an incoming pod's share of
        the node); False where a load percentage has no meaning."""
        return False


class LoadPlugin(Plugin):
    """A built-in whose value is a load percentage of the node (busy, used): score = 100 - load."""

    load_name: ClassVar[str]  # what the percentage measures, e.g. "cpu load"

    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        self.reads_recording_rules = spec.reads_recording_rules
        super().__init__(spec, identity)

    def build_query(self) -> str:
        by = promql.label_name(self.identity.node_label)
        return self.rule_expression(by) if self.reads_recording_rules else self.expression(by)

    @abstractmethod
    def expression(self, by: str) -> str:
        """PromQL for the load percent from node_exporter's series, one series per value of label `by`."""

    def rule_expression(self, by: str) -> str:
        """PromQL for the load percent from the node mixin's rule (a ratio), averaged over timeRange; the
        highest per node, as two node_exporter pods are scraped at once during a rollout."""
        (rule,) = NODE_MIXIN_RULES[self.name]
        averaged = promql.over_range(
            "avg_over_time", promql.selector(rule, *self.rule_matchers()), self.time_range_seconds
        )
        return f"100 * max by ({by}) ({averaged})"

    def rule_matchers(self) -> tuple[str, ...]:
        """Label matchers on the rule's series (a per-device rule's devices)."""
        return ()

    def load_sample(self, value: float, sample_time: float) -> Sample:
        load = clamp_percent(value)
        over = self.threshold is not None and load > self.threshold
        return Sample(value, sample_time, score=100.0 - load, over_threshold=over, is_load_percent=True)

    def samples(self, by_node: Mapping[str, Series]) -> dict[str, Sample]:
        return {node: self.load_sample(series.value, series.timestamp) for node, series in by_node.items()}

    def with_extra_load(self, sample: Sample, percent: float) -> Sample:
        if not sample.is_load_percent:
            return sample
        return self.load_sample(sample.value + percent, sample.sample_time)

    def crosses_threshold(self, value: float, percent: float) -> bool:
        return self.threshold is not None and clamp_percent(value + percent) > self.threshold

    @property
    def threshold_reason(self) -> str:
        return f"{self.load_name} above {self.threshold:g}%"

    def describe(self, value: float) -> str:
        return f"{self.load_name} {value:.0f}%"
