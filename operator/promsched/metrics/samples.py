"""Values as they come from Prometheus (series) and as plugins keep them per node (samples).

Series and samples are named tuples, not frozen dataclasses: a refresh builds one of each per node and
plugin (60,000 at 5000 nodes), and a frozen dataclass takes twice as long to build (each field set
through `object.__setattr__`). Both are as immutable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple


class Series(NamedTuple):
    """One element of an instant vector; `timestamp` is the query's evaluation time (unix seconds)."""

    labels: Mapping[str, str]
    value: float
    timestamp: float


@dataclass(frozen=True, slots=True)
class QueryResult:
    """A parsed instant-vector answer. Series whose value is NaN or ±Inf are left out of `series` and
    listed in `non_finite`: such a value has no place on a 0..100 scale."""

    query: str
    series: tuple[Series, ...]
    non_finite: tuple[Series, ...] = ()
    warnings: tuple[str, ...] = ()


class Sample(NamedTuple):
    """One node's value for one plugin, and the score it gives.

    `value` is the plugin's raw value (a load percent for the built-ins; bytes/s for network on a node
    without a known link speed; the query's value for a custom plugin). `sample_time` is when
    Prometheus evaluated the query. `score` is 0..100, higher is better. `over_threshold` says whether
    the value is past the plugin's threshold (the node is then filtered out). `is_load_percent` says the
    value is a load percentage scored as 100 - load, to which extra load can be added.
    """

    value: float
    sample_time: float
    score: float
    over_threshold: bool = False
    is_load_percent: bool = False
