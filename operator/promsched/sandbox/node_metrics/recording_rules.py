"""The kube-prometheus node recording rules the sandbox's Prometheus evaluates: the node mixin's, which
promsched reads with a plugin's `source: RecordingRules`, and the names Trimaran's metrics library
(load-watcher) reads.

As kube-prometheus relabels it, `instance` on the recorded series is the Kubernetes node name:
load-watcher takes the node from it. The sandbox's exporter labels raw series `instance="<node>:9100"`
(promsched's raw queries map that through node_uname_info), so only the recorded series carry the bare
node name, through `label_replace`; a policy reading the rules here names nodes by `instance` (nodeIdentity
Label). The node mixin's expressions (its `node-exporter.rules` group): busy CPU as 1 - the idle, iowait
and steal share over 5 minutes, averaged over the node's CPUs; memory in use as a share of MemTotal; disk
busy time per device of the mixin's disk devices over 5 minutes; network bytes per second over 5 minutes
summed over every device but lo. load-watcher's other names are copies, evaluated after them in the same
group: its CPU rule means the same, and its network rules (3m windows in kube-prometheus' older rules)
feed 15-minute averages, which a 5m window does not change. Values are ratios (0-1) or bytes/s.
"""

from __future__ import annotations

from promsched.api.builtins import NODE_MIXIN_RULES, BuiltinPlugin
from promsched.sandbox.node_metrics.exporting import JOB

_PORT = ":9100"
_DISK_DEVICES = "(/dev/)?(mmcblk.p.+|nvme.+|rbd.+|sd.+|vd.+|xvd.+|dm-.+|md.+|dasd.+)"
(CPU_UTILISATION,) = NODE_MIXIN_RULES[BuiltinPlugin.CPU]
(MEMORY_UTILISATION,) = NODE_MIXIN_RULES[BuiltinPlugin.MEMORY]
(DISK_IO_TIME,) = NODE_MIXIN_RULES[BuiltinPlugin.DISK_IO]
NETWORK_RECEIVE, NETWORK_TRANSMIT = NODE_MIXIN_RULES[BuiltinPlugin.NETWORK]
CPU_RULE = "instance:node_cpu:ratio"  # load-watcher's


def _by_node_name(expr: str) -> str:
    """`expr` with `instance="<node>:9100"` rewritten to `instance="<node>"` (label_replace's regex is
    anchored, so an instance without the port is left as it is)."""
    return f'label_replace({expr}, "instance", "$1", "instance", "(.+){_PORT}")'


def node_mixin_expressions(job: str) -> dict[str, str]:
    """The node mixin's rules over the node_exporter series of `job`, as kube-prometheus-stack ships them
    (the tests evaluate promsched's queries over these)."""
    nodes = f'job="{job}"'

    def network(direction: str) -> str:
        counter = f'node_network_{direction}_bytes_total{{{nodes},device!="lo"}}'
        return f"sum without (device) (rate({counter}[5m]))"

    return {
        CPU_UTILISATION: "1 - avg without (cpu) (sum without (mode) "
        f'(rate(node_cpu_seconds_total{{{nodes},mode=~"idle|iowait|steal"}}[5m])))',
        # The mixin falls back to Buffers + Cached + MemFree + Slab on kernels without MemAvailable, which
        # every kernel since 3.14 exports.
        MEMORY_UTILISATION: f"1 - node_memory_MemAvailable_bytes{{{nodes}}}"
        f" / node_memory_MemTotal_bytes{{{nodes}}}",
        DISK_IO_TIME: f'rate(node_disk_io_time_seconds_total{{{nodes},device=~"{_DISK_DEVICES}"}}[5m])',
        NETWORK_RECEIVE: network("receive"),
        NETWORK_TRANSMIT: network("transmit"),
    }


# Only the simulated nodes: the real node_exporter's job describes this machine, not a Kubernetes node.
NODE_MIXIN_RULES_BY_NODE_NAME = {
    name: _by_node_name(expr) for name, expr in node_mixin_expressions(JOB).items()
}

# load-watcher's names that the node mixin's do not already give.
LOAD_WATCHER_COPIES: dict[str, str] = {
    CPU_RULE: CPU_UTILISATION,
    "instance:node_network_receive_bytes:rate:sum": NETWORK_RECEIVE,
    "instance:node_network_transmit_bytes:rate:sum": NETWORK_TRANSMIT,
}


# load-watcher averages the rules over 15 minutes and fetches once a minute, so a sample every 15 s (half
# kube-prometheus' 30 s) loses nothing; at the 2 s scrape interval Prometheus would evaluate 5-minute
# rates over every node's CPU series 7 times as often.
EVALUATION_INTERVAL = "15s"


def rule_groups() -> dict[str, object]:
    """The rules as a Prometheus rule file: one group, so the copies read this evaluation's values."""
    rules = [{"record": name, "expr": expr} for name, expr in NODE_MIXIN_RULES_BY_NODE_NAME.items()]
    rules += [{"record": name, "expr": source} for name, source in LOAD_WATCHER_COPIES.items()]
    return {"groups": [{"name": "node-exporter.rules", "interval": EVALUATION_INTERVAL, "rules": rules}]}
