"""The normalisations kube-scheduler's Score plugins apply, to 0..100 in whole numbers as kube does."""

from __future__ import annotations

from collections.abc import Sequence

from promsched.scheduling.framework import MAX_SCORE, NodeScores


def scaled_to_best(raw: Sequence[int], *, fewer_is_better: bool = False) -> NodeScores:
    """kube's DefaultNormalizeScore: each raw count as a share of the largest (reversed when fewer is
    better); all zero leaves every node at 0, or at 100 when fewer is better."""
    most = max(raw, default=0)
    if most <= 0:
        scores = [MAX_SCORE if fewer_is_better else 0] * len(raw)
    else:
        scaled = [MAX_SCORE * value // most for value in raw]
        scores = [MAX_SCORE - score for score in scaled] if fewer_is_better else scaled
    return NodeScores([float(value) for value in raw], [float(score) for score in scores])
