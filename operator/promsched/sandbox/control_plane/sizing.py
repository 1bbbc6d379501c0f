"""How the simulated nodes' heartbeats and the wait for them scale with the number of nodes.

Up to 100 nodes the sandbox runs with the values it always had. Past that, kube-controller-manager's
grace periods grow with the node count (140 s at 1,000 nodes), and past 1,000 nodes kwok's lease
duration too: its lease renewals (one per node every quarter of the lease duration) outrun a small
machine. At 5,000 nodes and 40 s leases kwok owed 500 writes/s and managed ~16/s on 2 cores, so leases
aged past kube-controller-manager's 50 s grace period and it tainted nodes unreachable as fast as they
became Ready.
"""

from __future__ import annotations

import math

KWOK_LEASE_SECONDS = 40  # up to 1,000 nodes: 100 renewals/s
LEASE_RENEWALS_PER_SECOND = 100
# kube-controller-manager's own defaults, kept for small sandboxes.
NODE_MONITOR_GRACE_SECONDS = 50
NODE_STARTUP_GRACE_SECONDS = 60
# A pace kwok keeps even when the machine is busy (it managed ~16/s at 5,000 nodes on 2 cores).
SLOW_RENEWALS_PER_SECOND = 10


def lease_seconds(nodes: int) -> int:
    """kwok's `--node-lease-duration-seconds`: long enough that renewals, one per node every quarter
    of it, stay within `LEASE_RENEWALS_PER_SECOND`."""
    return max(KWOK_LEASE_SECONDS, math.ceil(4 * nodes / LEASE_RENEWALS_PER_SECOND))


def node_monitor_grace_seconds(nodes: int) -> int:
    """kube-controller-manager's `--node-monitor-grace-period`: a lease that kwok renews late because
    it is slow never looks stale. One lease duration, plus a whole round of the nodes' first leases
    (or of renewals fallen behind) at `SLOW_RENEWALS_PER_SECOND`."""
    slow_round = math.ceil(nodes / SLOW_RENEWALS_PER_SECOND)
    return max(NODE_MONITOR_GRACE_SECONDS, lease_seconds(nodes) + slow_round)


def node_startup_grace_seconds(nodes: int) -> int:
    """kube-controller-manager's `--node-startup-grace-period`: a node kwok has not yet initialised is
    not marked unreachable (only for kwok to initialise it again) while kwok works through the others."""
    return max(NODE_STARTUP_GRACE_SECONDS, node_monitor_grace_seconds(nodes))


def ready_poll_seconds(nodes: int) -> float:
    """How often the start-up lists the nodes to see them Ready: a listing of 5,000 nodes every half
    second took ~43% of a core, so large sandboxes are looked at every few seconds."""
    return max(0.5, nodes / 1000)


def ready_deadline_seconds(nodes: int) -> float:
    """How long the nodes may take to be Ready: kwok initialises them one by one, ~20/s at 1,000
    nodes on 2 cores (that sandbox is up in 75-85 s, metrics included); this allows half that pace."""
    return 60 + nodes / 10
