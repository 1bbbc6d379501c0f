"""The built-in plugins: their names, the defaults they use when a policy leaves a field unset, and
which plugin-entry fields belong to which of them."""

from __future__ import annotations

from enum import StrEnum


class BuiltinPlugin(StrEnum):
    """Plugins promsched implements itself over node_exporter series; any other name is a custom plugin."""

    CPU = "cpu"
    MEMORY = "memory"
    DISK_IO = "diskIO"
    DISK_SPACE = "diskSpace"
    NETWORK = "network"


BUILTIN_PLUGIN_NAMES: tuple[str, ...] = tuple(plugin.value for plugin in BuiltinPlugin)


class MetricSource(StrEnum):
    """Where a built-in plugin reads its nodes' values."""

    NODE_EXPORTER = "NodeExporter"  # node_exporter's raw series, over the plugin's own timeRange
    RECORDING_RULES = "RecordingRules"  # the node mixin's recorded series (NODE_MIXIN_RULES)


# The node mixin's recording rules (kube-prometheus-stack's `node-exporter.rules` group, evaluated whether
# or not promsched runs) that a built-in reads with source RecordingRules: one selector instead of rating
# every node's raw counters on each refresh. diskSpace has no such rule.
NODE_MIXIN_RULES: dict[str, tuple[str, ...]] = {
    BuiltinPlugin.CPU: ("instance:node_cpu_utilisation:rate5m",),
    BuiltinPlugin.MEMORY: ("instance:node_memory_utilisation:ratio",),
    BuiltinPlugin.DISK_IO: ("instance_device:node_disk_io_time_seconds:rate5m",),
    BuiltinPlugin.NETWORK: (
        "instance:node_network_receive_bytes_excluding_lo:rate5m",
        "instance:node_network_transmit_bytes_excluding_lo:rate5m",
    ),
}
# The rate window the node mixin's counter rules take (their `:rate5m`).
NODE_MIXIN_RATE_SECONDS = 300.0

# What a built-in uses when the policy leaves the field unset (kept out of the schema's `default`
# because each applies to one plugin only).
DEFAULT_DISK_DEVICE_PATTERN = "sd[a-z]+|nvme[0-9]+n[0-9]+|vd[a-z]+|xvd[a-z]+"
DEFAULT_MOUNTPOINT = "/"
# Network devices the network plugin leaves out unless the policy says otherwise: everything but the
# node's physical NICs. Each pod's veth (and the bridges, tunnels and overlays it is routed through)
# carries traffic the physical NIC counts already, and would add its own 10 Gb/s "link speed".
# Collected from node_exporter setups of real fleets (kube-prometheus excludes veth.* and 15-hex-char
# names; the node and kubernetes mixins lo, veth, docker, flannel, cali, cbr, cni and br).
DEFAULT_NETWORK_DEVICE_EXCLUSIONS: tuple[tuple[str, str], ...] = (
    ("lo", "loopback"),
    ("veth.*", "pod veth pairs (most CNIs, Docker, Weave)"),
    ("cali.*", "Calico pod interfaces"),
    ("lxc.*", "Cilium pod interfaces"),
    ("eni[0-9a-f]+", "AWS VPC CNI pod interfaces (EKS)"),
    ("gke[0-9a-f]+", "GKE pod interfaces"),
    ("azv.*", "Azure CNI pod interfaces (AKS)"),
    ("enP.*", "Hyper-V accelerated-networking VFs, which carry eth0's traffic (AKS)"),
    ("[0-9a-f]{15}", "OVN-Kubernetes pod interfaces (container ID prefixes)"),
    ("antrea-.*|cilium_.*|flannel.*|cni.*|cbr.*|weave.*|datapath|kube-.*|nodelocaldns", "CNI devices"),
    ("docker.*|br.*|virbr.*|ovs-.*|ovn-.*", "bridges and virtual switches"),
    ("vxlan.*|genev.*|gre.*|ip6gre.*|erspan.*|ip6tnl.*|sit.*|ip_vti.*|ip6_vti.*", "tunnels and overlays"),
    ("tun.*|tap.*|wg.*|tailscale.*|zt.*", "VPN devices"),
    ("bond.*|team.*|.+[.].+", "bonds, teams and VLANs, over NICs counted already"),
    ("dummy.*|ifb.*|nlmon.*", "dummy, traffic-shaping and netlink-monitor devices"),
)
DEFAULT_NETWORK_DEVICE_EXCLUDE_PATTERN = "|".join(pattern for pattern, _ in DEFAULT_NETWORK_DEVICE_EXCLUSIONS)

# Fields a plugin entry may set only for some plugins: wire name -> the plugins that accept it, where
# None means "custom plugins". Both the model validator and the CRD's CEL rules are generated from this.
PLUGIN_FIELD_OWNERS: dict[str, str | None] = {
    "devices": BuiltinPlugin.NETWORK,
    "deviceExcludePattern": BuiltinPlugin.NETWORK,
    "devicePattern": BuiltinPlugin.DISK_IO,
    "mountpoint": BuiltinPlugin.DISK_SPACE,
    "nodeLabel": None,
    "higherIsBetter": None,
    "normalization": None,
}
