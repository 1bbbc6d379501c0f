"""What the pods bound or assumed on a node take from it (`NodeUsage`), kept by the scheduler's cache."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from promsched.scheduling.objects.pods import HostPort, PodInfo
from promsched.scheduling.objects.resources import ZERO_RESOURCES, Resources


@dataclass(slots=True)
class NodeUsage:
    """What the pods bound or assumed on one node take from it: requests, pod count, host ports.

    Mutable and owned by the scheduler's cache. Host ports are counted, so removing one pod leaves a
    port that another pod on the node also declares in use.
    """

    requested: Resources = ZERO_RESOURCES
    pods: int = 0
    host_ports: Counter[HostPort] = field(default_factory=Counter)

    def add(self, pod: PodInfo) -> None:
        self.requested += pod.requests
        self.pods += 1
        self.host_ports.update(pod.host_ports)

    def remove(self, pod: PodInfo) -> None:
        self.requested -= pod.requests
        self.pods -= 1
        self.host_ports.subtract(pod.host_ports)
        for port in pod.host_ports:
            if self.host_ports[port] <= 0:
                del self.host_ports[port]

    def without(self, pods: Iterable[PodInfo]) -> NodeUsage:
        """What would be left on the node if `pods` (counted here) were gone; this usage is unchanged."""
        left = NodeUsage(self.requested, self.pods, Counter(self.host_ports))
        for pod in pods:
            left.remove(pod)
        return left
