"""Issue 40's estimation error: for each pod promsched placed with an estimate (the `est` of its
`promsched.io/decision` annotation), the estimate against what the pod really used, in percent of that,
by where the estimate came from; beside Koordinator's rule worked out on the same pods.

What a pod really used: the sandbox's pods use exactly their `sandbox.promsched.io/usage` annotation
from the moment they run until they end (the closed-loop exporter adds it to their node), so the usage
observed 10 minutes after a pod started, or at its end if sooner, is its workload's `Usage`.

Sources: `Siblings` (a percentile of the running siblings' observed usage), `fallback` (the policy asks
for Siblings but none showed usage yet, so its rule held: factor x request) and `Requests` (a policy
whose estimation is Requests: factor x request for every pod). Koordinator's LoadAware plugin estimates
a pod it has no metrics for as 85% (cpu) and 70% (memory) of its limit, else of its request; the trace's
pods set no limits, so here it is the factor times the request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from bench.quality_measures import PodLives, mean
from bench.quality_trace import Workload
from bench.tables import shown, table
from promsched.api.annotations import AnnotationError, decode_decision

KOORDINATOR_FACTORS = {"cpu": 0.85, "memory": 0.70}
SOURCES = ("Siblings", "fallback", "Requests")
RESOURCES = ("cpu", "memory")


def source_of(basis: str, policy_source: str) -> str:
    """Where one resource's estimate came from, read from its basis (`ResourceEstimate.basis`)."""
    if "sibling" in basis:
        return "Siblings"
    return "fallback" if policy_source == "Siblings" else "Requests"


def error_pct(estimate: float, used: float) -> float:
    """The absolute error of `estimate` in percent of what was `used`."""
    return 100.0 * abs(estimate - used) / used if used else math.nan


def estimation_errors(
    lives: PodLives, workloads: Mapping[str, Workload], policy_source: str
) -> dict[str, dict[str, dict[str, float]]]:
    """source -> resource -> pods, promsched's mean absolute error in % (`mae_pct`) and Koordinator's on
    the same pods (`koordinator_mae_pct`). Pods without an estimate, or of no trace workload, are left
    out; a source no pod's estimate came from is absent."""
    errors: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for pod, text in sorted(lives.decision.items()):
        workload = workloads.get(lives.workload.get(pod, ""))
        try:
            estimate = decode_decision(text).estimate
        except AnnotationError:
            continue
        if workload is None or estimate is None:
            continue
        for resource, amount, basis, used, requested in (
            (
                "cpu",
                estimate.milli_cpu,
                estimate.cpu_basis,
                workload.usage.cpu_milli,
                workload.cpu_request_milli,
            ),
            (
                "memory",
                estimate.memory,
                estimate.memory_basis,
                workload.usage.memory_bytes,
                workload.memory_request_bytes,
            ),
        ):
            koordinator = KOORDINATOR_FACTORS[resource] * requested
            errors.setdefault((source_of(basis, policy_source), resource), []).append(
                (error_pct(amount, used), error_pct(koordinator, used))
            )
    found: dict[str, dict[str, dict[str, float]]] = {}
    for (source, resource), pairs in sorted(errors.items()):
        found.setdefault(source, {})[resource] = {
            "pods": float(len(pairs)),
            "mae_pct": mean([ours for ours, _ in pairs]),
            "koordinator_mae_pct": mean([theirs for _, theirs in pairs]),
        }
    return found


def estimation_table(runs: list[dict[str, Any]]) -> list[str]:
    """The markdown table of every run's estimation errors (runs without any give no row)."""
    rows = []
    for run in runs:
        for source in SOURCES:
            for resource in RESOURCES:
                found = run.get("estimation", {}).get(source, {}).get(resource)
                if found:
                    rows.append(
                        [
                            run["label"],
                            source,
                            resource,
                            shown("{:.0f}", found["pods"]),
                            shown("{:.1f}", found["mae_pct"]),
                            shown("{:.1f}", found["koordinator_mae_pct"]),
                        ]
                    )
    if not rows:
        return []
    header = ["scheduler", "source", "resource", "pods", "mean abs. error, %", "Koordinator's rule, %"]
    return table(header, rows)
