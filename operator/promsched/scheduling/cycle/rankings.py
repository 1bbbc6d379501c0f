"""The feasible nodes of a decision ranked with the pod's placement preferences blended in.

A pod with preferences gets each feasible node's total blended with its preference score, and its result
the preference plugins' parts after the metric plugins'. Built for every feasible node (~420 at 1000
nodes), those results were a third of such a decision (`python -m bench.decide_micro --shapes all`);
the scheduler reads the few it shows and chooses among, so each is built when read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from promsched.metrics.scoring import NodeResult
from promsched.scheduling.scores import Preferences


class Ranking(Sequence[NodeResult]):
    """`results` ranked by `totals` (theirs, blended), best first, ties in their order."""

    __slots__ = ("_built", "_order", "_preferences", "_results", "_totals")

    def __init__(self, results: Sequence[NodeResult], totals: list[float], preferences: Preferences) -> None:
        self._results = results
        self._totals = totals
        self._preferences = preferences
        self._order = sorted(range(len(results)), key=totals.__getitem__, reverse=True)  # stable
        self._built: dict[int, NodeResult] = {}

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> NodeResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[NodeResult]: ...

    def __getitem__(self, index: int | slice) -> NodeResult | list[NodeResult]:
        if isinstance(index, slice):
            return [self._result(position) for position in self._order[index]]
        return self._result(self._order[index])

    def _result(self, position: int) -> NodeResult:
        built = self._built.get(position)
        if built is None:
            result = self._results[position]
            plugins = result.plugins + self._preferences.parts(position)
            built = self._built[position] = NodeResult(
                result.node, self._totals[position], plugins, result.reasons
            )
        return built
