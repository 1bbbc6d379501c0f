"""node_exporter series as kube-prometheus-stack scrapes them, for the query and preflight tests.

Its ServiceMonitor gives every series the target's `container`, `endpoint`, `instance` (the host's
address and port: node_exporter runs on the host network), `job`, `namespace`, `pod` and `service`
labels, and the relabelling these tests assume adds `node` from the pod's node. The hosts' names
differ in case from the Node names the kubelet registered (it lowercases them).

Two nodes are caught mid-rollout of the node_exporter DaemonSet: their old and new pods are both
scraped for the whole window, reporting the same host counters under different `pod` labels.
"""

from __future__ import annotations

from dataclasses import dataclass

from promsched.api.policies import NodeIdentitySource
from promsched.metrics import NodeIdentity

STEPS = 40  # samples at 15s: 10 minutes
SCRAPE_SECONDS = 15
TEN_GBIT_BYTES = 1.25e9  # what a veth reports as its speed


@dataclass(frozen=True)
class Host:
    node: str  # the Node's name
    address: str  # its InternalIP
    hostname: str  # node_uname_info's nodename
    pods: tuple[str, ...]  # node_exporter pods scraped at once
    # device -> (receive B/s, transmit B/s, node_network_speed_bytes or None when not exported)
    devices: dict[str, tuple[float, float, float | None]]

    @property
    def instance(self) -> str:
        return f"{self.address}:9100"

    def target_labels(self, pod: str) -> dict[str, str]:
        return {
            "container": "node-exporter",
            "endpoint": "http-metrics",
            "instance": self.instance,
            "job": "node-exporter",
            "namespace": "monitoring",
            "node": self.node,
            "pod": pod,
            "service": "kps-prometheus-node-exporter",
        }


_POD_VETHS = {
    "veth1a2b3c4d": (50.0, 50.0, TEN_GBIT_BYTES),
    "cali0e1f2a3b4c5": (30.0, 30.0, TEN_GBIT_BYTES),
    "lo": (10_000.0, 10_000.0, None),
}

HOSTS = (
    # eth0 at a known speed: 200 B/s of 1000 B/s, whatever the veths and bridge carry.
    Host(
        "worker-01",
        "10.0.1.5",
        "Worker-01",
        ("kps-prometheus-node-exporter-old01", "kps-prometheus-node-exporter-new01"),
        {"eth0": (100.0, 100.0, 1000.0), "cni0": (20.0, 20.0, -1.0), **_POD_VETHS},
    ),
    # A virtio NIC: speed -1, so the node's link speed is unknown and it keeps bytes/s.
    Host(
        "worker-02",
        "10.0.1.6",
        "WORKER-02",
        ("kps-prometheus-node-exporter-old02", "kps-prometheus-node-exporter-new02"),
        {"ens5": (300.0, 100.0, -1.0), **_POD_VETHS},
    ),
    # Two NICs, one without a speed series: unknown too, not a percent of eth0's speed alone.
    Host(
        "worker-03",
        "10.0.1.7",
        "worker-03",
        ("kps-prometheus-node-exporter-c3d4e",),
        {"eth0": (100.0, 100.0, 1000.0), "eth1": (50.0, 50.0, None), **_POD_VETHS},
    ),
)
NODES = [host.node for host in HOSTS]
ADDRESSES = {host.address: host.node for host in HOSTS}

# The network plugin's answer by default: physical NICs only, each counted once.
NETWORK_PERCENT = {"worker-01": 20.0}
NETWORK_BYTES = {"worker-02": 400.0, "worker-03": 300.0}
# With deviceExcludePattern "lo": every veth, the bridge and the doubled pods would count.
NETWORK_BYTES_ALL_BUT_LO = {
    "worker-01": 200.0 + 40.0 + 100.0 + 60.0,
    "worker-02": 400.0 + 100.0 + 60.0,
    "worker-03": 300.0 + 100.0 + 60.0,
}


def _labels_text(metric: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{name}="{value}"' for name, value in labels.items())
    return f"{metric}{{{inner}}}"


def input_series() -> list[dict[str, str]]:
    """promtool `input_series`: every host's counters, speeds and uname, once per scraped pod."""
    series = []
    for host in HOSTS:
        for pod in host.pods:
            target = host.target_labels(pod)
            series.append(
                {
                    "series": _labels_text("node_uname_info", {**target, "nodename": host.hostname}),
                    "values": f"1+0x{STEPS}",
                }
            )
            for device, (receive, transmit, speed) in host.devices.items():
                labels = {**target, "device": device}
                for metric, per_second in (
                    ("node_network_receive_bytes_total", receive),
                    ("node_network_transmit_bytes_total", transmit),
                ):
                    values = f"0+{per_second * SCRAPE_SECONDS}x{STEPS}"
                    series.append({"series": _labels_text(metric, labels), "values": values})
                if speed is not None:
                    series.append(
                        {
                            "series": _labels_text("node_network_speed_bytes", labels),
                            "values": f"{speed}+0x{STEPS}",
                        }
                    )
    return series


def host_of(node: str) -> Host:
    return next(host for host in HOSTS if host.node == node)


BY_NODE_LABEL = NodeIdentity(NodeIdentitySource.LABEL, "node")
BY_ADDRESS = NodeIdentity(NodeIdentitySource.INTERNAL_IP, "instance")
BY_UNAME = NodeIdentity(NodeIdentitySource.UNAME_NODENAME)
IDENTITIES = [BY_UNAME, BY_NODE_LABEL, BY_ADDRESS]


def result_labels(identity: NodeIdentity, host: Host) -> dict[str, str]:
    """The labels a plugin's query result keeps for `host` under `identity`."""
    if identity == BY_NODE_LABEL:
        return {"node": host.node}
    return {"instance": host.instance}  # UnameNodename: looked up in `uname_answer`


def uname_answer() -> list[tuple[dict[str, str], float]]:
    """What UNAME_QUERY gives: each host's node_exporter instance and the hostname it reports."""
    return [({"instance": host.instance, "nodename": host.hostname}, 1.0) for host in HOSTS]


def network_answer(
    identity: NodeIdentity, percent: dict[str, float], bytes_per_second: dict[str, float]
) -> list[tuple[dict[str, str], float]]:
    """The network plugin's result series: percent of link speed, or bytes/s where it is unknown."""
    return [
        ({**result_labels(identity, host_of(node)), "promsched_unit": unit}, value)
        for unit, values in (("percent", percent), ("bytes_per_second", bytes_per_second))
        for node, value in values.items()
    ]
