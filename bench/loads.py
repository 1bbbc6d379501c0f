"""The sandbox nodes' load: right-skewed load profiles, their allocatable, and the spread of utilisation
once pods are placed (the measure of `make bench`'s decision quality)."""

from __future__ import annotations

import random
import statistics
from typing import Any

from bench.pods import POD_CPU, POD_MEMORY
from promsched.sandbox import launching
from promsched.sandbox.node_metrics.profiles import LoadProfile, NodeSetup
from promsched.scheduling.objects.resources import parse_quantity


def skewed_profiles(names: list[str], seed: int) -> dict[str, dict[str, float]]:
    """Right-skewed loads: most nodes lightly or moderately loaded, a long tail of hot ones."""
    rng = random.Random(seed)
    profiles = {}
    for name in names:
        profiles[name] = {
            "cpu": round(5 + 90 * rng.betavariate(1.3, 2.6), 1),
            "memory": round(10 + 80 * rng.betavariate(1.5, 2.5), 1),
            "diskBusy": round(2 + 60 * rng.betavariate(1.2, 4.0), 1),
            "diskUsed": round(20 + 70 * rng.random(), 1),
            "network": float(round(1e5 * 10 ** (2.6 * rng.random()))),
        }
    return profiles


def allocatable() -> tuple[int, int]:
    """The sandbox nodes' allocatable CPU (millicores) and memory (bytes), as `up` creates them."""
    manifest: Any = launching.node_manifest("node-0", 0, NodeSetup(LoadProfile()))
    allocatable = manifest["status"]["allocatable"]
    return (
        parse_quantity(allocatable["cpu"], "cpu", milli=True),
        parse_quantity(allocatable["memory"], "memory"),
    )


def utilisation_spread(profiles: dict[str, dict[str, float]], placements: dict[str, str]) -> dict[str, float]:
    """Standard deviation and maximum over nodes of CPU and memory utilisation (percent): each node's
    profile plus the requests of the pods placed on it."""
    milli_cpu, memory = allocatable()
    pod_cpu = parse_quantity(POD_CPU, "cpu", milli=True)
    pod_memory = parse_quantity(POD_MEMORY, "memory")
    count = dict.fromkeys(profiles, 0)
    for node in placements.values():
        count[node] = count.get(node, 0) + 1
    cpu = [profiles[n]["cpu"] + 100.0 * count[n] * pod_cpu / milli_cpu for n in profiles]
    mem = [profiles[n]["memory"] + 100.0 * count[n] * pod_memory / memory for n in profiles]
    return {
        "cpu_std": statistics.pstdev(cpu),
        "cpu_max": max(cpu),
        "memory_std": statistics.pstdev(mem),
        "memory_max": max(mem),
        "max_pods_per_node": float(max(count.values(), default=0)),
    }
