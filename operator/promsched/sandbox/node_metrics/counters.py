"""A simulated node's counters and series: its background load profile plus the pods running on it.

Counters are integrated over time (`advance`), so a change of profile or of the pods on a node never
makes a counter jump: `rate()` over a window takes a new pod's usage in gradually, as on a real node.

Node load is the profile plus the sum of its pods' usage, capped where a real node cannot go further: a
saturated node stays at 100% CPU busy, 100% disk busy, 100% memory used (no available memory; a real
node would evict or OOM-kill, the sandbox does neither) and eth0 at its link speed each way. On a
saturated CPU the background profile keeps its share and the pods share the rest in proportion to
their usage, which their container series then show.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from promsched.sandbox.node_metrics.profiles import LoadProfile
from promsched.sandbox.node_metrics.usages import ZERO_USAGE, ContainerShare, PodUsage

JOB: Final = "sandbox-nodes"
# The sandbox nodes' capacity (launching's node manifests): 4 cores, 16Gi.
CPUS: Final = 4
MEMORY_TOTAL_BYTES: Final = 16 * 1024**3
FILESYSTEM_SIZE_BYTES: Final = 100 * 1024**3
ETH0_SPEED_BYTES: Final = 125_000_000  # 1 Gbit/s
# Received plus sent: a full-duplex link carries its speed each way.
NETWORK_CAPACITY_BYTES: Final = 2 * ETH0_SPEED_BYTES
LOOPBACK_BYTES_PER_SECOND: Final = 2_000.0
# Busy CPU time is split between modes the way a typical workload does; only idle matters to promsched.
USER_SHARE: Final = 0.7

HELP: Final = {
    "node_cpu_seconds_total": "counter",
    "node_memory_MemAvailable_bytes": "gauge",
    "node_memory_MemTotal_bytes": "gauge",
    "node_filesystem_avail_bytes": "gauge",
    "node_filesystem_size_bytes": "gauge",
    "node_disk_io_time_seconds_total": "counter",
    "node_network_receive_bytes_total": "counter",
    "node_network_transmit_bytes_total": "counter",
    "node_network_speed_bytes": "gauge",
    "node_uname_info": "gauge",
    "container_cpu_usage_seconds_total": "counter",
    "container_memory_working_set_bytes": "gauge",
}


@dataclass(eq=False, slots=True)
class ContainerCounters:
    """One container's cAdvisor series, their label sets rendered once (a scrape renders thousands)."""

    name: str
    cpu_series: str
    memory_series: str
    cores: float
    memory_text: str
    cpu_seconds: float = 0.0


def container_counters(
    namespace: str, pod: str, node: str, usage: PodUsage, shares: list[ContainerShare]
) -> list[ContainerCounters]:
    # Labelled as kubelet's cAdvisor endpoint labels them, plus the `instance` of the node's own series.
    counters = []
    for share in shares:
        labels = (
            f'namespace="{namespace}",pod="{pod}",container="{share.name}",node="{node}",'
            f'instance="{node}:9100"'
        )
        counters.append(
            ContainerCounters(
                share.name,
                f"container_cpu_usage_seconds_total{{{labels}}}",
                f"container_memory_working_set_bytes{{{labels}}}",
                usage.cpu_cores * share.cpu,
                f"{usage.memory * share.memory:.0f}",
            )
        )
    return counters


@dataclass
class NodeCounters:
    profile: LoadProfile
    updated_at: float
    idle: float = 0.0
    user: float = 0.0
    system: float = 0.0
    io_time: float = 0.0
    eth0_rx: float = 0.0
    eth0_tx: float = 0.0
    lo_bytes: float = 0.0
    # The pods running here, by UID: their usage and their containers' counters.
    pods: dict[str, tuple[PodUsage, list[ContainerCounters]]] = field(default_factory=dict)
    pod_usage: PodUsage = ZERO_USAGE

    def advance(self, now: float) -> None:
        elapsed = max(0.0, now - self.updated_at)
        background = self.profile.cpu / 100.0
        wanted = self.pod_usage.cpu_cores / CPUS
        busy = min(1.0, background + wanted)
        self.idle += elapsed * (1.0 - busy)
        self.user += elapsed * busy * USER_SHARE
        self.system += elapsed * busy * (1.0 - USER_SHARE)
        if self.pods:
            # What the background leaves, shared in proportion to what each container wants.
            granted = elapsed * (busy - background) / wanted if wanted > 0 else 0.0
            for _usage, containers in self.pods.values():
                for container in containers:
                    container.cpu_seconds += container.cores * granted
        self.io_time += elapsed * min(1.0, (self.profile.disk_busy + self.pod_usage.disk_busy) / 100.0)
        network = min(NETWORK_CAPACITY_BYTES, self.profile.network + self.pod_usage.network)
        self.eth0_rx += elapsed * network / 2.0
        self.eth0_tx += elapsed * network / 2.0
        self.lo_bytes += elapsed * LOOPBACK_BYTES_PER_SECOND
        self.updated_at = now

    def place(self, uid: str, usage: PodUsage, containers: list[ContainerCounters], now: float) -> None:
        """Count a pod from `now` on, or its new usage; same-named containers keep their counters."""
        self.advance(now)
        previous = self.pods.get(uid)
        if previous is not None:
            seconds = {container.name: container.cpu_seconds for container in previous[1]}
            for container in containers:
                container.cpu_seconds = seconds.get(container.name, 0.0)
        self.pods[uid] = (usage, containers)
        self._sum()

    def remove(self, uid: str, now: float) -> None:
        """Stop counting a pod from `now` on."""
        self.advance(now)
        if self.pods.pop(uid, None) is not None:
            self._sum()

    def _sum(self) -> None:
        # Summed afresh on every change, so no rounding accumulates however many pods come and go.
        total = ZERO_USAGE
        for usage, _containers in self.pods.values():
            total += usage
        self.pod_usage = total

    @property
    def memory_available(self) -> float:
        used = MEMORY_TOTAL_BYTES * self.profile.memory / 100.0 + self.pod_usage.memory
        return max(0.0, MEMORY_TOTAL_BYTES - used)


@functools.cache
def node_series(name: str) -> tuple[str, ...]:
    """One node's series, label sets and all, in the order `node_values` gives their values."""
    inst = f'instance="{name}:9100"'
    fs = 'device="/dev/vda1",fstype="ext4",mountpoint="/"'
    cpus = [
        f'node_cpu_seconds_total{{{inst},cpu="{cpu}",mode="{mode}"}}'
        for cpu in range(CPUS)
        for mode in ("idle", "user", "system")
    ]
    return (
        *cpus,
        f"node_memory_MemAvailable_bytes{{{inst}}}",
        f"node_memory_MemTotal_bytes{{{inst}}}",
        f"node_filesystem_avail_bytes{{{inst},{fs}}}",
        f"node_filesystem_size_bytes{{{inst},{fs}}}",
        f'node_disk_io_time_seconds_total{{{inst},device="vda"}}',
        f'node_network_receive_bytes_total{{{inst},device="eth0"}}',
        f'node_network_transmit_bytes_total{{{inst},device="eth0"}}',
        f'node_network_receive_bytes_total{{{inst},device="lo"}}',
        f'node_network_transmit_bytes_total{{{inst},device="lo"}}',
        f'node_network_speed_bytes{{{inst},device="eth0"}}',
        f'node_uname_info{{{inst},nodename="{name}",sysname="Linux",machine="x86_64",'
        'release="6.1.0-promsched-sandbox"}',
    )


def node_values(node: NodeCounters) -> list[str]:
    """The node's values as text, in `node_series`' order."""
    modes = (f"{node.idle:.6f}", f"{node.user:.6f}", f"{node.system:.6f}")
    free_space = FILESYSTEM_SIZE_BYTES * (1.0 - node.profile.disk_used / 100.0)
    lo = f"{node.lo_bytes:.3f}"
    return [
        *(modes * CPUS),
        f"{node.memory_available:.0f}",
        f"{MEMORY_TOTAL_BYTES}",
        f"{free_space:.0f}",
        f"{FILESYSTEM_SIZE_BYTES}",
        f"{node.io_time:.6f}",
        f"{node.eth0_rx:.3f}",
        f"{node.eth0_tx:.3f}",
        lo,
        lo,
        f"{ETH0_SPEED_BYTES}",
        "1",
    ]


def node_samples(name: str, node: NodeCounters) -> list[tuple[str, str]]:
    """One node's samples as (series, formatted value) pairs; every series' name opens its text."""
    return list(zip(node_series(name), node_values(node), strict=True))


def container_samples(nodes: Iterable[NodeCounters]) -> list[tuple[str, str]]:
    """The containers' samples on `nodes` as (series, formatted value) pairs, one family after the other."""
    containers = [c for node in nodes for _usage, listed in node.pods.values() for c in listed]
    return [(c.cpu_series, f"{c.cpu_seconds:.6f}") for c in containers] + [
        (c.memory_series, c.memory_text) for c in containers
    ]
