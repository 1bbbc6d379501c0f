"""What every plugin provides: one query for all nodes, and scores from its per-node results.

Scores run from 0 to 100, higher is better. Where the raw value is a percentage the score is absolute
(100 - load%), so 1% and 2% CPU score 99 and 98, not 100 and 50. Only unbounded values are scaled
relative to the other nodes (min-max); when all such values are equal every node scores
`ALL_EQUAL_SCORE`: no node is worse than another.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import ClassVar

from promsched.api.builtins import NODE_MIXIN_RULES
from promsched.api.plugin_specs import PluginSpec
from promsched.metrics import promql
from promsched.metrics.dividing import SplitQuery
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.offloading import paced
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


def complement(percentile: int | None) -> int | None:
    """The percentile of a series whose complement is the load (idle, available) that gives the load's
    `percentile`: the load's highest value is the lowest available, its p90 the available's p10."""
    return None if percentile is None else 100 - percentile


def used_percent(available: str, total: str, by: str) -> str:
    """Percent of `total` not `available`, per series, then the worst series per `by` value."""
    return f"100 * max by ({by}) (1 - {available} / ({total} > 0))"


NO_LABELS: Mapping[str, str] = MappingProxyType({})


class Plugin(ABC):
    """A plugin compiled from its policy entry: `query` is the exact text of what each refresh asks, sent
    whole unless `split` says in which two parts (`dividing`)."""

    split: SplitQuery | None = None

    def __init__(self, spec: PluginSpec, identity: NodeIdentity) -> None:
        self.name = spec.name
        self.weight = spec.weight
        self.threshold = spec.threshold
        self.time_range_seconds = spec.time_range_seconds
        # How the value sums up timeRange: None the mean, 100 the highest value, else that percentile.
        self.percentile = spec.window_percentile
        self.identity = identity
        # Subclasses set their own settings before calling this, so the query can use them.
        self.query = self.build_query()

    @abstractmethod
    def build_query(self) -> str:
        """The PromQL giving one series per node, as `identity` maps them."""

    @abstractmethod
    def samples(self, by_node: Mapping[str, Series]) -> dict[str, Sample]:
        """Each node's value, score and threshold verdict."""

    def rescored(self, kept: Mapping[str, Sample]) -> dict[str, Sample]:
        """The samples a plugin with the same query gave, scored under this one's settings (a changed
        threshold or weight), each with its value and time: as `samples` scores the series they came
        from, which a snapshot does not keep (at 5000 nodes, 25,000 objects for the collector to walk)."""
        read = self.labels_read
        return self.samples({node: Series(read(s), s.value, s.sample_time) for node, s in kept.items()})

    def labels_read(self, sample: Sample) -> Mapping[str, str]:
        """The labels of a series that `samples` reads, as its sample tells them: none but network's."""
        return NO_LABELS

    @property
    @abstractmethod
    def threshold_reason(self) -> str:
        """The filter reason for nodes past the threshold; equal for all nodes so reasons aggregate."""

    @abstractmethod
    def describe(self, value: float) -> str:
        """A raw value as a reader would like it in a filter reason (``cpu load 91%``)."""

    @property
    def aggregation(self) -> str | None:
        """How the value sums up timeRange, where that is not the mean: max or pNN."""
        if self.percentile is None:
            return None
        return "max" if self.percentile == 100 else f"p{self.percentile}"

    @property
    def window_seconds(self) -> float:
        """How many seconds of the past a new load must fill to show wholly in the value (0: at once)."""
        return self.showing_seconds(self.time_range_seconds)

    def showing_seconds(self, seconds: float) -> float:
        """How much of a window of `seconds` a new load must fill to show wholly: all of it for the mean,
        none for the highest value, the last (100 - NN)% for the NNth percentile."""
        if self.percentile is None:
            return seconds
        return seconds * (100 - self.percentile) / 100

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
        """PromQL for the load percent from the node mixin's rule (a ratio), each series summed up over
        timeRange; the highest per node, as two node_exporter pods are scraped at once during a rollout
        (and, for diskIO, the busiest disk counts)."""
        (rule,) = NODE_MIXIN_RULES[self.name]
        series = promql.selector(rule, *self.rule_matchers())
        summed_up = promql.summed_up_range(self.percentile, series, self.time_range_seconds)
        return f"100 * max by ({by}) ({summed_up})"

    @property
    def step_rate_seconds(self) -> float:
        """max and pNN over counters: the rate window at each step across timeRange (at least the short
        instant window, so each rate has samples; at least the step, so the steps leave no gap)."""
        return max(INSTANT_COUNTER_WINDOW_SECONDS, promql.subquery_step_seconds(self.time_range_seconds))

    def rated(self, expression: Callable[[str], str]) -> str:
        """A counter-based `expression(window)` over timeRange. The mean is one rate over timeRange (0s: the
        short instant window); max and pNN are taken of the expression rated over `step_rate_seconds`
        at each subquery step across timeRange."""
        if self.percentile is None:
            return expression(counter_window(self.time_range_seconds))
        steps = promql.subquery(expression(promql.duration(self.step_rate_seconds)), self.time_range_seconds)
        return promql.over_window(self.percentile, steps)

    def rule_matchers(self) -> tuple[str, ...]:
        """Label matchers on the rule's series (a per-device rule's devices)."""
        return ()

    def load_sample(self, value: float, sample_time: float) -> Sample:
        load = clamp_percent(value)
        over = self.threshold is not None and load > self.threshold
        return Sample(value, sample_time, score=100.0 - load, over_threshold=over, is_load_percent=True)

    def samples(self, by_node: Mapping[str, Series]) -> dict[str, Sample]:
        return {
            node: self.load_sample(series.value, series.timestamp) for node, series in paced(by_node.items())
        }

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
