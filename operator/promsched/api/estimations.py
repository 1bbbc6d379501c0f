"""spec.estimation: how much CPU and memory an incoming pod is expected to use.

Requests are a poor guess at usage, so the herd adjustment (pods placed too recently for the metrics to
show them) and the cpu and memory thresholds count each pod at an estimate instead: a high percentile of
what its running siblings (pods of the same controller: ReplicaSet, StatefulSet, Job...) use, as
Prometheus's cAdvisor series show it, else a declared rule over its requests and limits.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from promsched.api.fields import Duration, Quantity, SpecModel, parse_duration

# Koordinator LoadAware's count for a pod without requests (kube's nonzero defaults use 100m / 200Mi).
DEFAULT_UNREQUESTED_CPU = "250m"
DEFAULT_UNREQUESTED_MEMORY = "200Mi"


class EstimationSource(StrEnum):
    SIBLINGS = "Siblings"
    REQUESTS = "Requests"


class EstimationFallback(SpecModel):
    """The rule for a pod whose siblings show nothing (or with source Requests): factor x request, or the
    limit."""

    cpu_factor: float = Field(
        1.0,
        ge=0,
        le=10,
        description="CPU is estimated at cpuFactor x the pod's CPU request (0..10; Trimaran's "
        "TargetLoadPacking uses 1.5, Koordinator 0.85).",
    )
    memory_factor: float = Field(
        1.0,
        ge=0,
        le=10,
        description="Memory is estimated at memoryFactor x the pod's memory request (0..10; Koordinator "
        "uses 0.7).",
    )
    use_limits: bool = Field(
        False,
        description="true: a resource whose every container sets a limit (or with a pod-level limit) is "
        "estimated at that limit instead, as Trimaran does.",
    )


class UnrequestedAmounts(SpecModel):
    """What a pod that requests no CPU (or no memory) counts as, when the fallback rule applies."""

    cpu: Quantity = Field(
        DEFAULT_UNREQUESTED_CPU, description="CPU of a pod without a CPU request (Koordinator's 250m)."
    )
    memory: Quantity = Field(
        DEFAULT_UNREQUESTED_MEMORY,
        description="Memory of a pod without a memory request (Koordinator's 200 MB, 200Mi).",
    )


class Estimation(SpecModel):
    """How much CPU and memory an incoming pod is expected to use: counted in the herd adjustment and
    against the cpu and memory plugins' thresholds."""

    source: EstimationSource = Field(
        EstimationSource.REQUESTS,
        description="Siblings: the percentile of what the pod's running siblings (same controller owner) "
        "use, from container_cpu_usage_seconds_total and container_memory_working_set_bytes, one query "
        "per resource per refresh; the fallback rule where none shows. Requests: the fallback rule alone, "
        "no queries.",
    )
    percentile: int = Field(
        90,
        ge=1,
        le=100,
        description="Siblings: the percentile (nearest rank, 1..100) of the siblings' usage; 100 is the "
        "busiest sibling.",
    )
    window: Duration = Field(
        "5m", description="Siblings: the window CPU usage is rated over (Go duration, more than 0s)."
    )
    fallback: EstimationFallback = Field(
        EstimationFallback(),
        description="The rule where no sibling shows usage: factor x request, or the limit.",
    )
    unrequested: UnrequestedAmounts = Field(
        UnrequestedAmounts(), description="What the rule counts for a pod that requests no CPU or memory."
    )

    @model_validator(mode="after")
    def _positive_window(self) -> Estimation:
        if self.window_seconds <= 0:
            raise ValueError("window must be longer than 0s, e.g. window: 5m")
        return self

    @property
    def window_seconds(self) -> float:
        return parse_duration(self.window, "estimation.window")

    @property
    def queries_usage(self) -> bool:
        return self.source is EstimationSource.SIBLINGS
