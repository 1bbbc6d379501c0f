"""The herd adjustment: pods placed too recently for the metrics to show them weigh on their node.

A snapshot's values average a window that ended when they were read; a pod placed since (or placed
less than a scrape before) is not, or not wholly, in them. Without adding what they do not show yet, a
burst would all land on the node that looked idlest when the metrics were read. Each placement counts
at its pod's estimate (`estimating`), for the share of each plugin's window it is missing from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from promsched.metrics.planning import Plan
from promsched.metrics.snapshots import Snapshot
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.estimating import ESTIMATED_PLUGINS, Estimates

# A pod's load reaches the metrics once it runs and the exporter is scraped again: kube-prometheus-stack
# scrapes every 30 s.
METRIC_LAG_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class HerdWindow:
    """How much of a pod's load one plugin's value shows, by when the pod was placed: none until
    `METRIC_LAG_SECONDS` before the value was read, then a growing share of the window it averages."""

    plugin: str
    read_at: float  # unix time of the query the value came from
    window: float  # seconds the value averages over (0: instant)

    @property
    def horizon(self) -> float:
        """Pods placed at or before this are wholly in the value."""
        return self.read_at - METRIC_LAG_SECONDS - self.window

    def unseen(self, placed_at: float) -> float:
        """The share (0..1) of a pod placed at `placed_at` the value does not show yet."""
        covered = self.read_at - METRIC_LAG_SECONDS - placed_at
        if covered <= 0.0:
            return 1.0
        if covered >= self.window:
            return 0.0
        return 1.0 - covered / self.window


def herd_windows(snapshot: Snapshot) -> tuple[HerdWindow, ...]:
    """What each estimated plugin's value in `snapshot` shows of recently placed (or removed) pods."""
    windows = []
    for name in ESTIMATED_PLUGINS:
        plugin_snapshot = snapshot.plugins.get(name)
        if plugin_snapshot is None:
            continue
        read_at = plugin_snapshot.refreshed_at or snapshot.taken_at
        windows.append(HerdWindow(name, read_at, plugin_snapshot.plugin.window_seconds))
    return tuple(windows)


def herd_memory_seconds(plan: Plan) -> float:
    """How long placements matter to `plan`'s herd adjustment."""
    windows = [plugin.window_seconds for plugin in plan.plugins if plugin.name in ESTIMATED_PLUGINS]
    return METRIC_LAG_SECONDS + max(windows, default=0.0)


def _unseen_load(
    cache: ClusterCache, node: str, windows: tuple[HerdWindow, ...], estimates: Estimates
) -> dict[str, float]:
    info = cache.nodes.get(node)
    if info is None:
        return {}
    # Each placement's estimate once for all windows, newest first as each window sums them.
    recent = cache.placements_after(node, min(window.horizon for window in windows))
    placed = [(placement.at, estimates.of(placement.pod)) for placement in recent]
    load = {}
    for window in windows:
        allocatable_of, estimated = ESTIMATED_PLUGINS[window.plugin]
        allocatable = allocatable_of(info.allocatable)
        if not allocatable:
            continue
        since = window.horizon
        unseen = sum(estimated(estimate) * window.unseen(at) for at, estimate in placed if at > since)
        if unseen:
            load[window.plugin] = 100.0 * unseen / allocatable
    return load


@dataclass(slots=True)
class HerdLoads:
    """Load (percentage points) to add per node and plugin for pods placed too recently for `snapshot`'s
    values to show them fully, so a burst does not all land on the node that looked idlest when the
    metrics were read.

    Per snapshot it is worked out once per node, and again for the nodes whose placements or object
    changed since, so a pod's cycle costs what changed since the previous one. The next snapshot's
    (`succeeded_by`) works out only the nodes with a placement recent enough to count, and those changed.
    """

    snapshot: Snapshot
    windows: tuple[HerdWindow, ...] | None = None
    # node -> the load to add per plugin, for the nodes with some, as of the cache's placement and node
    # change counts `version` (a load is a share of the node's allocatable)
    loads: dict[str, dict[str, float]] = field(default_factory=dict)
    version: tuple[int, int] = (0, 0)
    # The nodes with a placement after the earliest window's horizon, as of `version`: all that may have
    # a load, whatever the estimates.
    recent: set[str] = field(default_factory=set)
    # Nodes to work out at the next update besides those changed since `version`.
    pending: set[str] = field(default_factory=set)

    def succeeded_by(self, snapshot: Snapshot) -> HerdLoads:
        """The loads of `snapshot`, the next one, to be worked out from these: the nodes without a
        placement recent enough to count here have none there either, since its values were read no
        earlier. At 5000 nodes that spares the first pod on each snapshot a walk of every node. Windows
        that reach back further (a changed plan) start over."""
        windows = herd_windows(snapshot)
        if self.windows is None or not _no_earlier(windows, self.windows):
            return HerdLoads(snapshot, windows)
        return HerdLoads(snapshot, windows, version=self.version, pending=set(self.recent))

    def following(
        self, cache: ClusterCache, estimates_for: Callable[[ClusterCache], Estimates]
    ) -> Mapping[str, dict[str, float]]:
        """The loads, up to date with `cache`; nodes with none are left out."""
        windows = self.windows
        if windows is None:
            windows = self.windows = herd_windows(self.snapshot)
        version = (cache.placement_changes.count, cache.node_changes.count)
        if not windows or (self.version == version and not self.pending):
            return self.loads
        known, recent = self.loads, self.recent
        horizon = min(window.horizon for window in windows)
        changed = set(cache.placement_changes.since(self.version[0]))
        changed.update(cache.node_changes.since(self.version[1]))
        changed.update(self.pending)
        self.pending = set()
        for node in changed:
            placements = cache.placements.get(node)
            load = None
            if placements and placements[-1].at > horizon:
                recent.add(node)
                load = _unseen_load(cache, node, windows, estimates_for(cache))
            else:
                recent.discard(node)
            if load:
                known[node] = load
            else:
                known.pop(node, None)
        self.version = version
        return known


def _no_earlier(windows: tuple[HerdWindow, ...], before: tuple[HerdWindow, ...]) -> bool:
    """Whether `windows` are the same plugins' as `before`, none reaching back further."""
    return len(windows) == len(before) and all(
        window.plugin == old.plugin and window.horizon >= old.horizon
        for window, old in zip(windows, before, strict=True)
    )
