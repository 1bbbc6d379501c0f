"""Issue 40's outage scenario: the sandbox's Prometheus stops for a stated span in the middle of the trace,
then comes back, while one seed's trace is replayed against each scheduler again.

Each scheduler's behaviour in the outage is its own row: CPU hot-node-seconds over the outage window, the
pods that arrived in it, how many still waited when Prometheus came back and their mean and longest wait.
Prometheus records nothing while it is down, so the nodes' CPU in the window is worked out as the
closed-loop exporter makes it: each node's background plus the usage of the pods running on it
(bound until gone), over its allocatable. After the outage: promsched's recovery, the seconds from
Prometheus answering again until its `promsched_policy_snapshot_age_seconds` (every plugin answered) is
within one refresh interval; the nodes its decisions after that still filtered out, and the evictions
(Events) in the run's namespace: a stale reading must neither block a node nor evict a pod.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.quality_measures import CPU_HOT, PodLives, mean
from bench.requestcounts import by_label
from bench.scraping import metrics_text
from bench.tables import shown, table, value
from bench.targets import target
from promsched.sandbox.control_plane.clusters import SandboxError
from promsched.sandbox.control_plane.supervising import Supervisor, http_ok

PROMETHEUS = "prometheus"  # the sandbox's process name for it (node_metrics.monitoring)
SCHEDULERS = ("promsched", "ks-default", "trimaran-tlp", "trimaran-lvrb")
SAMPLE_S = 2.0  # how often promsched's snapshot age and its policy's recent decisions are read
READY_TIMEOUT_S = 120.0
EVICTION_REASONS = frozenset({"Rebalanced", "Evicted", "Preempted"})
# The bounds: within 5% of kube-scheduler's hot-node-seconds in the outage, no longer wait (1 s
# the least difference counted, as for the mean waits), fresh again within one refresh.
HOT_WITHIN = 1.05
READING_REASONS = re.compile("threshold|metric", re.IGNORECASE)
WAIT_SLACK_S = 1.0


@dataclass(frozen=True)
class OutageWindow:
    """When Prometheus is stopped, in seconds into the trace, and for how long."""

    at_s: float
    span_s: float

    @property
    def until_s(self) -> float:
        return self.at_s + self.span_s


def centred(duration_s: float, span_s: float) -> OutageWindow:
    """An outage of `span_s` in the middle of a trace of `duration_s`."""
    if not 0 < span_s < duration_s:
        raise ValueError(f"an outage of {span_s:g} s does not fit inside a trace of {duration_s:g} s")
    return OutageWindow((duration_s - span_s) / 2, span_s)


# ----- the bookkeeping, pure ------------------------------------------------------------------------------


def placed_cpu(
    lives: PodLives,
    usage_milli: Mapping[str, int],
    background: Mapping[str, float],
    allocatable_milli: int,
    at: float,
) -> dict[str, float]:
    """Each node's CPU percent at `at`: its background plus the pods bound to it and not yet gone."""
    cpu = dict(background)
    for pod, node in lives.node.items():
        if lives.bound[pod] <= at < lives.gone.get(pod, math.inf) and node in cpu:
            cpu[node] += 100.0 * usage_milli.get(pod, 0) / allocatable_milli
    return cpu


def placed_hot_node_seconds(
    lives: PodLives,
    usage_milli: Mapping[str, int],
    background: Mapping[str, float],
    allocatable_milli: int,
    window: tuple[float, float],
    step: float,
) -> float:
    """Nodes above CPU_HOT at each step from window[0] until window[1], times the step."""
    start, end = window
    steps = max(0, math.ceil((end - start) / step - 1e-9))
    return step * sum(
        sum(
            value > CPU_HOT
            for value in placed_cpu(
                lives, usage_milli, background, allocatable_milli, start + k * step
            ).values()
        )
        for k in range(steps)
    )


def waits_in(lives: PodLives, window: tuple[float, float], end: float) -> dict[str, float]:
    """The pods first seen in the window: how many, how many still waited for a node at its end, and
    their waits (until bound, deleted unbound or the end of the run)."""
    start, until = window
    arrived = [name for name, seen in lives.first_seen.items() if start <= seen < until]
    waits = lives.waits(end)
    still = [
        name
        for name in arrived
        if lives.bound.get(name, math.inf) >= until and lives.gone.get(name, math.inf) >= until
    ]
    return {
        "pods_arrived": float(len(arrived)),
        "waiting_at_end_of_outage": float(len(still)),
        "wait_mean_s": mean([waits[name] for name in arrived]),
        "wait_max_s": max((waits[name] for name in arrived), default=math.nan),
    }


def recovery_s(samples: Sequence[tuple[float, float]], back_at: float, fresh_s: float) -> float:
    """Seconds from `back_at` (Prometheus answering again) to the first sample (time, snapshot age) at
    or after it whose age is within `fresh_s`; NaN if none was."""
    for at, age in samples:
        if at >= back_at and age <= fresh_s:
            return at - back_at
    return math.nan


def filtered_after(decisions: Sequence[Mapping[str, Any]], since: float) -> dict[str, int]:
    """The most nodes one decision made at or after `since` filtered out on a reading, per reason (a
    policy status's recentDecisions): reasons naming a threshold or a metric; kube's own filters
    ("Insufficient cpu", ...) judge requests, not readings, and are left out."""
    found: dict[str, int] = {}
    for decision in decisions:
        if datetime.fromisoformat(str(decision["time"])).timestamp() < since:
            continue
        for filtered in decision.get("filtered", []):
            reason = str(filtered["reason"])
            if not READING_REASONS.search(reason):
                continue
            found[reason] = max(found.get(reason, 0), int(filtered["count"]))
    return found


def evictions(events: Sequence[Mapping[str, Any]]) -> int:
    """The Events that record a pod evicted or preempted."""
    return sum(event.get("reason") in EVICTION_REASONS for event in events)


# ----- the outage, live ----------------------------------------------------------------------------------


def _answers(url: str) -> bool:
    """Whether `url` answers 200; a server still starting refuses the connection."""
    try:
        return http_ok(url)
    except OSError:
        return False


@dataclass
class Outage:
    """One run's outage: when Prometheus stopped and answered again (Unix seconds), and promsched's
    snapshot age sampled meanwhile."""

    window: OutageWindow
    directory: Path
    prometheus_url: str
    stopped: float = math.nan
    back: float = math.nan
    ages: list[tuple[float, float]] = field(default_factory=list)
    # The policy status's recentDecisions seen while sampling, by (pod, time): the status keeps the
    # last 10 only, so the outage's are gathered as they pass.
    decisions: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)

    def saw_decisions(self, decisions: Sequence[Mapping[str, Any]]) -> None:
        for decision in decisions:
            self.decisions[(str(decision.get("pod")), str(decision.get("time")))] = decision

    def stop(self) -> None:
        Supervisor(self.directory).stop(PROMETHEUS)
        self.stopped = time.time()

    def start(self) -> None:
        Supervisor(self.directory).restart(PROMETHEUS)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _answers(f"{self.prometheus_url}/-/ready"):
            if time.monotonic() > deadline:
                raise SandboxError(f"Prometheus not ready {READY_TIMEOUT_S:.0f} s after the outage")
            time.sleep(0.5)
        self.back = time.time()

    def interruptions(self) -> tuple[tuple[float, Callable[[], None]], ...]:
        """What the replay does, and when (seconds into the trace)."""
        return ((self.window.at_s, self.stop), (self.window.until_s, self.start))

    def measures(
        self,
        lives: PodLives,
        usage_milli: Mapping[str, int],
        background: Mapping[str, float],
        allocatable_milli: int,
        end: float,
        step: float,
        fresh_s: float,
    ) -> dict[str, Any]:
        window = (self.stopped, self.back)
        return {
            "outage_s": self.back - self.stopped,
            "hot_cpu_node_s": placed_hot_node_seconds(
                lives, usage_milli, background, allocatable_milli, window, step
            ),
            **waits_in(lives, window, end),
            "recovery_s": recovery_s(self.ages, self.back, fresh_s) if self.ages else math.nan,
            "snapshot_ages": [[round(at - self.stopped, 1), round(age, 1)] for at, age in self.ages],
        }


@contextlib.contextmanager
def sampling_ages(
    outage: Outage,
    metrics_url: str | None,
    policy: str,
    read_decisions: Callable[[], Sequence[Mapping[str, Any]]] | None = None,
) -> Iterator[None]:
    """Sample promsched's snapshot age of `policy`, and its recent decisions (`read_decisions`), every
    SAMPLE_S while the block runs (nothing for another scheduler)."""
    done = threading.Event()

    def sample() -> None:
        while not done.wait(SAMPLE_S):
            with contextlib.suppress(OSError, ValueError):
                ages = by_label(
                    metrics_text(str(metrics_url)), "promsched_policy_snapshot_age_seconds", "policy"
                )
                if policy in ages:
                    outage.ages.append((time.time(), ages[policy]))
            if read_decisions is not None:
                with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
                    outage.saw_decisions(read_decisions())

    sampler = threading.Thread(target=sample, daemon=True)
    if metrics_url is not None:
        sampler.start()
    try:
        yield
    finally:
        done.set()
        if sampler.is_alive():
            sampler.join()


def namespace_events(kubectl: Callable[..., subprocess.CompletedProcess[str]], namespace: str) -> list[Any]:
    listing = kubectl("get", "events", "-n", namespace, "-o", "json")
    items: list[Any] = json.loads(listing.stdout)["items"]
    return items


# ----- reporting ------------------------------------------------------------------------------------------


def outage_rows(runs: Sequence[tuple[int, Mapping[str, Any]]]) -> list[str]:
    """The outage table: one row per seed and scheduler."""
    header = [
        "seed",
        "scheduler",
        "outage, s",
        "CPU hot-node-s in it",
        "pods arrived",
        "waiting when back",
        "mean wait, s",
        "max wait, s",
        "fresh again after, s",
        "evictions",
        "filtered after recovery",
    ]
    rows = []
    for seed, run in runs:
        filtered = run.get("filtered_after_recovery")
        rows.append(
            [
                str(seed),
                run["label"],
                shown("{:.0f}", value(run, ("outage", "outage_s"))),
                shown("{:.0f}", value(run, ("outage", "hot_cpu_node_s"))),
                shown("{:.0f}", value(run, ("outage", "pods_arrived"))),
                shown("{:.0f}", value(run, ("outage", "waiting_at_end_of_outage"))),
                shown("{:.2f}", value(run, ("outage", "wait_mean_s"))),
                shown("{:.1f}", value(run, ("outage", "wait_max_s"))),
                shown("{:.1f}", value(run, ("outage", "recovery_s"))),
                str(run.get("evictions", "-")),
                "-" if filtered is None else (", ".join(f"{k}: {v}" for k, v in filtered.items()) or "none"),
            ]
        )
    return table(header, rows)


def outage_targets(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Issue 40's outage targets, over every seed's outage runs (each promsched run against the
    kube-scheduler run of the same seed)."""
    if not runs:
        return []
    ours = [run for run in runs if run["variant"] == "promsched"]
    kube = [run for run in runs if run["variant"] == "ks-default"]
    found = []
    if ours and kube:
        pairs = list(zip(ours, kube, strict=False))
        hot = [
            (value(a, ("outage", "hot_cpu_node_s")), value(b, ("outage", "hot_cpu_node_s"))) for a, b in pairs
        ]
        found.append(
            target(
                f"in the outage, CPU hot-node-seconds within {HOT_WITHIN - 1:.0%} of kube-scheduler's",
                "; ".join(f"{a:.0f} vs {b:.0f}" for a, b in hot),
                all(a <= HOT_WITHIN * b for a, b in hot),
            )
        )
        waits = [(value(a, ("outage", "wait_max_s")), value(b, ("outage", "wait_max_s"))) for a, b in pairs]
        found.append(
            target(
                "in the outage, no pod waiting longer than under kube-scheduler (max wait; 1 s the least "
                "difference counted)",
                "; ".join(f"{a:.1f} s vs {b:.1f} s" for a, b in waits),
                all(not a > b + WAIT_SLACK_S for a, b in waits),
            )
        )
    if ours:
        recovered = [(value(run, ("outage", "recovery_s")), value(run, ("refresh_s",))) for run in ours]
        found.append(
            target(
                "after the outage, promsched's metrics fresh again within one refresh",
                "; ".join(f"{a:.1f} s (refresh {b:g} s)" for a, b in recovered),
                all(a <= b for a, b in recovered),
            )
        )
        stale = [(run.get("evictions", 0), run.get("filtered_after_recovery", {})) for run in ours]
        found.append(
            target(
                "no node blocked nor pod evicted on a stale reading",
                "; ".join(f"{a} evictions, filtered after recovery: {b or 'none'}" for a, b in stale),
                all(a == 0 and not b for a, b in stale),
            )
        )
    return found
