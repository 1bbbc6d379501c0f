"""A ranking with preferences reads as the list of blended results sorted best first would."""

from __future__ import annotations

from promsched.metrics.scoring import NodeResult, PluginResult
from promsched.scheduling.cycle.rankings import Ranking
from promsched.scheduling.framework import NodeScores
from promsched.scheduling.scores import Preferences


def test_a_ranking_reads_as_the_blended_results_sorted_best_first() -> None:
    load = [NodeResult(f"n{index}", 50.0, (PluginResult("cpu", 50.0, 50.0),), ()) for index in range(4)]
    preferences = Preferences(
        [0.0, 100.0, 0.0, 50.0], [("NodeAffinity", NodeScores([0.0, 1.0, 0.0, 0.5], [0.0, 100.0, 0.0, 50.0]))]
    )
    totals = [40.0, 60.0, 40.0, 50.0]
    ranking = Ranking(load, totals, preferences)
    eager = sorted(
        (
            NodeResult(result.node, total, result.plugins + preferences.parts(index), result.reasons)
            for index, (result, total) in enumerate(zip(load, totals, strict=True))
        ),
        key=lambda result: result.total,
        reverse=True,
    )
    assert list(ranking) == eager
    assert [result.node for result in ranking] == ["n1", "n3", "n0", "n2"]  # ties keep their order
    assert ranking[:2] == eager[:2]
    assert ranking[-1] == eager[-1]
    assert len(ranking) == 4
    assert ranking[0] is ranking[0]  # built once: the scheduler tells the chosen node by identity
    assert ranking[0].plugins[-1] == PluginResult("NodeAffinity", 1.0, 100.0)
