"""The kube-prometheus node recording rules that Trimaran's metrics library (load-watcher) reads.

load-watcher queries `avg_over_time(RULE[15m])` and `stddev_over_time(RULE[15m])` and takes the node from
the `instance` label, so `instance` must be the Kubernetes node name, as kube-prometheus relabels it. The
sandbox's exporter labels raw series `instance="<node>:9100"` (promsched's own queries join on that with
`node_uname_info`), so the raw series keep it and only the recorded series carry the bare node name,
through `label_replace`. The expressions follow the rules' kube-prometheus meaning: busy CPU (not idle,
iowait or steal) over 5 minutes as a share of the node's CPUs; memory in use as a share of MemTotal;
network bytes over 3 minutes summed over the node's devices (loopback left out); disk busy time per
device over 5 minutes. Values are ratios (0-1); load-watcher multiplies them by 100.
"""

from __future__ import annotations

from promsched.sandbox.exporting import JOB

# Only the simulated nodes: the real node_exporter's job describes this machine, not a Kubernetes node.
_NODES = f'job="{JOB}"'
_PORT = ":9100"
CPU_RULE = "instance:node_cpu:ratio"


def _by_node_name(expr: str) -> str:
    """`expr` with `instance="<node>:9100"` rewritten to `instance="<node>"` (label_replace's regex is
    anchored, so an instance without the port is left as it is)."""
    return f'label_replace({expr}, "instance", "$1", "instance", "(.+){_PORT}")'


def _network(direction: str) -> str:
    counter = f'node_network_{direction}_bytes_total{{{_NODES},device!="lo"}}'
    return _by_node_name(f"sum by (instance) (rate({counter}[3m]))")


LOAD_WATCHER_RULES: dict[str, str] = {
    CPU_RULE: _by_node_name(
        f'sum without (cpu, mode) (rate(node_cpu_seconds_total{{{_NODES},mode!~"idle|iowait|steal"}}[5m]))'
        f" / on (instance) group_left () "
        f'count by (instance) (node_cpu_seconds_total{{{_NODES},mode="idle"}})'
    ),
    "instance:node_memory_utilisation:ratio": _by_node_name(
        f"1 - node_memory_MemAvailable_bytes{{{_NODES}}} / node_memory_MemTotal_bytes{{{_NODES}}}"
    ),
    "instance:node_network_receive_bytes:rate:sum": _network("receive"),
    "instance:node_network_transmit_bytes:rate:sum": _network("transmit"),
    "instance_device:node_disk_io_time_seconds:rate5m": _by_node_name(
        f"rate(node_disk_io_time_seconds_total{{{_NODES}}}[5m])"
    ),
}


# load-watcher averages the rules over 15 minutes and fetches once a minute, so a sample every 15 s (half
# kube-prometheus' 30 s) loses nothing; at the 2 s scrape interval Prometheus would evaluate 5-minute
# rates over every node's CPU series 7 times as often, for metrics nothing reads unless Trimaran runs.
EVALUATION_INTERVAL = "15s"


def rule_groups() -> dict[str, object]:
    """The rules as a Prometheus rule file."""
    rules = [{"record": name, "expr": expr} for name, expr in LOAD_WATCHER_RULES.items()]
    return {"groups": [{"name": "load-watcher-node-rules", "interval": EVALUATION_INTERVAL, "rules": rules}]}
