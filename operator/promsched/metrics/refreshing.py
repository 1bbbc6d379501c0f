"""The refresh loop: one query per plugin per interval, all plugins concurrently, into a new snapshot;
with nodeIdentity UnameNodename, also node_uname_info's hostnames, once for every plugin and only when
the last refresh's no longer serve (`identifying.RoundHostnames`); with spec.estimation.source
Siblings, also one query per resource for what pods use.

A plugin whose query fails keeps its previous samples (they age into staleness) and records the error;
the other plugins are unaffected. A failed hostnames query fails the plugins that map through it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from types import MappingProxyType

from promsched.metrics.dividing import Divisors, divided
from promsched.metrics.engines import engine_of
from promsched.metrics.errors import PrometheusError
from promsched.metrics.identifying import NodeDirectory, RoundHostnames, assign_nodes
from promsched.metrics.offloading import off_loop, off_loop_then_let_go
from promsched.metrics.planning import Plan
from promsched.metrics.plugins import Plugin
from promsched.metrics.querying import PrometheusClient, PrometheusEndpoint
from promsched.metrics.samples import QueryResult
from promsched.metrics.scoring import ScoreMemo, prescore
from promsched.metrics.snapshots import PluginSnapshot, Snapshot, empty_usage
from promsched.metrics.usage_querying import NO_POD_USAGE, PodUsage, refresh_usage

logger = logging.getLogger(__name__)

# Starts a named long-lived task: the operator's supervisor (`scheduling.supervising`) restarts it if it
# fails; by default a plain task.
TaskStarter = Callable[[str, Callable[[], Awaitable[None]]], asyncio.Task[None]]

HOSTNAMES_QUERY_NAME = "nodeIdentity"  # the hostnames query's name in RefreshObserver.query_finished


class RefreshObserver:
    """Hooks for the operator's own /metrics; subclass and override. The defaults do nothing."""

    def query_finished(self, plugin: str, seconds: float, error: PrometheusError | None) -> None:
        """After each plugin query: its duration, and its error or None."""

    def query_warned(self, plugin: str, warnings: tuple[str, ...]) -> None:
        """After a plugin query answered with warnings or a partial result (`QueryResult.warnings`)."""

    def snapshot_taken(self, snapshot: Snapshot) -> None:
        """After each refresh (metric age: ``snapshot.age_seconds(plugin, now)``)."""

    def refresh_started(self) -> None:
        """As a refresh begins its queries; `refresh_ended` follows, whether or not it succeeds."""

    def refresh_ended(self) -> None:
        """As a refresh ends, its snapshot and scores made or its failure raised."""


async def _refresh_plugin(
    plugin: Plugin,
    client: PrometheusClient,
    nodes: NodeDirectory | RoundHostnames,
    at: float,
    previous: PluginSnapshot | None,
    observer: RefreshObserver,
    stale_after: float,
) -> PluginSnapshot:
    started = time.monotonic()
    try:
        kept = previous.divisors if previous is not None else None
        result, divisors = await _ask(plugin, client, at, kept, stale_after)
        directory = nodes if isinstance(nodes, NodeDirectory) else await nodes.directory_for(result)
        if isinstance(directory, PrometheusError):
            # Every plugin that maps through the hostnames raises this one error: afresh, or each raise
            # would add its frames to the shared traceback.
            raise directory.with_traceback(None)
    except PrometheusError as error:
        observer.query_finished(plugin.name, time.monotonic() - started, error)
        # Once per new failure, not every interval while Prometheus stays down.
        repeated = previous is not None and previous.error is not None and str(previous.error) == str(error)
        logger.log(logging.DEBUG if repeated else logging.WARNING, "Plugin %s: %s", plugin.name, error)
        if previous is None or previous.plugin.query != plugin.query:
            return dataclasses.replace(PluginSnapshot.empty(plugin), error=error)
        # Same query as before: keep its last values, scored by this plugin's (maybe new) settings.
        samples = previous.samples if previous.plugin is plugin else plugin.rescored(previous.samples)
        return PluginSnapshot(
            plugin=plugin,
            samples=MappingProxyType(samples),
            refreshed_at=previous.refreshed_at,
            error=error,
            report=previous.report,
            divisors=previous.divisors,
        )
    observer.query_finished(plugin.name, time.monotonic() - started, None)
    if result.warnings:
        observer.query_warned(plugin.name, result.warnings)
    if previous is not None and previous.error is not None:
        logger.info("Plugin %s: the query works again", plugin.name)
    return await off_loop_then_let_go(_plugin_snapshot, plugin, result, divisors, directory, at)


async def _ask(
    plugin: Plugin, client: PrometheusClient, at: float, kept: Divisors | None, stale_after: float
) -> tuple[QueryResult, Divisors | None]:
    """The plugin's answer; for a split query its numerator's, and the divisors to divide it by: those
    kept where still usable and covering every node it names, else asked now."""
    split = plugin.split
    if split is None:
        return await client.query(plugin.query, at=at), None
    if kept is not None and kept.usable(split, at, stale_after):
        numerator = await client.query(split.numerator, at=at)
        if kept.cover(numerator, split.on):
            return numerator, kept
        divisor = await client.query(split.divisor, at=at)  # a node joined
    else:
        numerator, divisor = await asyncio.gather(
            client.query(split.numerator, at=at), client.query(split.divisor, at=at)
        )
    numerator = dataclasses.replace(numerator, warnings=numerator.warnings + divisor.warnings)
    return numerator, await off_loop_then_let_go(Divisors.of, divisor, split, at)


def _plugin_snapshot(
    plugin: Plugin, result: QueryResult, divisors: Divisors | None, directory: NodeDirectory, at: float
) -> PluginSnapshot:
    # Run off the event loop (pure work on immutable inputs): a node per series, a sample per node.
    if divisors is not None and plugin.split is not None:
        result = divided(result, divisors, plugin.split, plugin.query)
    assignment = assign_nodes(result, plugin.identity, directory)
    return PluginSnapshot(
        plugin=plugin,
        samples=MappingProxyType(plugin.samples(assignment.by_node)),
        refreshed_at=at,
        report=assignment.report,
        divisors=divisors,
    )


async def take_snapshot(
    plan: Plan,
    client: PrometheusClient,
    directory: NodeDirectory,
    *,
    previous: Snapshot | None = None,
    observer: RefreshObserver | None = None,
) -> Snapshot:
    """Query every plugin once (concurrently) and build the snapshot; `previous` supplies last values
    for plugins whose query fails."""
    # Evaluate at our own clock: staleness is judged against it, whatever Prometheus's clock says.
    at = time.time()
    observer = observer or RefreshObserver()
    hostnames: RoundHostnames | None = None
    if any(plugin.identity.uses_hostnames for plugin in plan.plugins):
        hostnames = RoundHostnames(
            client,
            directory,
            at,
            previous.hostnames if previous is not None else None,
            plan.stale_after_seconds,
            functools.partial(observer.query_finished, HOSTNAMES_QUERY_NAME),
        )
    refreshes = [
        _refresh_plugin(
            plugin,
            client,
            hostnames if hostnames is not None and plugin.identity.uses_hostnames else directory,
            at,
            previous.plugins.get(plugin.name) if previous is not None else None,
            observer,
            plan.stale_after_seconds,
        )
        for plugin in plan.plugins
    ]
    try:
        plugin_snapshots, pod_usage = await asyncio.gather(
            asyncio.gather(*refreshes), _usage_refresh(plan, client, at, previous, observer)
        )
    finally:
        if hostnames is not None:
            hostnames.cancel()
    plugins = {plugin_snapshot.plugin.name: plugin_snapshot for plugin_snapshot in plugin_snapshots}
    return Snapshot(
        plan=plan,
        taken_at=at,
        plugins=MappingProxyType(plugins),
        usage=pod_usage,
        hostnames=hostnames.kept_on() if hostnames is not None else None,
    )


async def _usage_refresh(
    plan: Plan, client: PrometheusClient, at: float, previous: Snapshot | None, observer: RefreshObserver
) -> PodUsage:
    """What pods use, when the plan's estimation reads it; the previous values where the query is the
    same, so a failed query keeps them."""
    start = empty_usage(plan)
    if start is NO_POD_USAGE:
        return start
    if previous is not None and previous.usage.cpu.query == start.cpu.query:
        start = previous.usage
    return await refresh_usage(start, client, at, observer.query_finished)


class Refresher:
    """Keeps a policy's snapshot fresh in a background task.

    `nodes` is called before every refresh for the current node names (and InternalIP addresses).
    `latest` is always a snapshot: until the first refresh it has no samples (every metric missing).
    """

    def __init__(
        self,
        plan: Plan,
        endpoint: PrometheusEndpoint,
        nodes: Callable[[], NodeDirectory],
        *,
        observer: RefreshObserver | None = None,
        run_task: TaskStarter | None = None,
    ) -> None:
        self.plan = plan
        self.endpoint = endpoint
        self._nodes = nodes
        self._run_task = run_task or _plain_task
        self._observer = observer or RefreshObserver()
        self._client = PrometheusClient(endpoint)
        self._latest = Snapshot.empty(plan, time.time())
        self._scores = ScoreMemo()
        self._task: asyncio.Task[None] | None = None
        self._refresh_lock = asyncio.Lock()

    @property
    def latest(self) -> Snapshot:
        return self._latest

    async def engine(self) -> str | None:
        """The engine behind the endpoint, for the preflight (`engines.engine_of`)."""
        return await engine_of(self._client)

    def scores_for(self, snapshot: Snapshot) -> ScoreMemo:
        """The nodes' scores worked out from `snapshot` when it was taken, if it is the latest; else
        an empty memo. Hand it to one owner: from then on it fills as pods are scored."""
        return self._scores if snapshot is self._latest else ScoreMemo()

    @property
    def client(self) -> PrometheusClient:
        return self._client

    @property
    def observer(self) -> RefreshObserver:
        """Told of each query made for this policy, the refreshes' and others' (a rebalance cycle's)."""
        return self._observer

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start refreshing every refresh interval, the first time at once (call inside the loop)."""
        if not self.running:
            self._task = self._run_task("metrics-refresh", self._run)

    async def refresh(self) -> Snapshot:
        """Refresh now and return the new snapshot (also what the loop does each interval)."""
        async with self._refresh_lock:
            self._observer.refresh_started()
            try:
                directory = self._nodes()
                snapshot = await take_snapshot(
                    self.plan, self._client, directory, previous=self._latest, observer=self._observer
                )
                # Scored off the event loop, so the first pod after a refresh does not score every node on
                # it (50-125 ms at 5000 nodes, while every other pod waits).
                self._scores = await off_loop(prescore, snapshot, directory.names)
                self._latest = snapshot
            finally:
                self._observer.refresh_ended()
        self._observer.snapshot_taken(self._latest)
        return self._latest

    async def update(self, plan: Plan, endpoint: PrometheusEndpoint) -> bool:
        """Switch to a changed plan or endpoint, restarting the loop; False (nothing done) if unchanged.

        The latest snapshot stays in use, under its own plan, until the new loop's first refresh.
        """
        if plan == self.plan and endpoint == self.endpoint:
            return False
        was_running = self.running
        await self._cancel()
        if endpoint != self.endpoint:
            await self._client.close()
            self._client = PrometheusClient(endpoint)
        self.plan, self.endpoint = plan, endpoint
        if was_running:
            self.start()
        return True

    async def stop(self) -> None:
        """Stop the loop and close the HTTP session; the latest snapshot stays readable."""
        await self._cancel()
        await self._client.close()

    async def _cancel(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            # wait() lets the task's CancelledError go but still raises if we are cancelled ourselves.
            await asyncio.wait([task])

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.refresh()
            except Exception:  # a bug must not end the loop: log it and try again next interval
                logger.exception("Refreshing the metric snapshot failed")
            await asyncio.sleep(max(0.0, self.plan.refresh_interval_seconds - (loop.time() - started)))


def _plain_task(name: str, work: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
    async def run() -> None:
        await work()

    return asyncio.create_task(run(), name=f"promsched-{name}")
