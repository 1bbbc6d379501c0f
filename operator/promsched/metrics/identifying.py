"""Which node a series belongs to, per the policy's nodeIdentity.

- UnameNodename: a series' ``instance`` is looked up in ``node_uname_info`` for the node's ``nodename``.
  That series is queried apart (`UNAME_QUERY`) and joined here, not in every query: at 5000 nodes the
  join cost Prometheus a third of a refresh's CPU and a fifth of its memory (`python -m
  bench.query_cost`). Its answer is kept across refreshes while `Hostnames.usable_for` and `cover`
  allow: it changes when a node's exporter does.
- Label: a label holds the node name, possibly with a ``:port`` suffix (``node-0:9100``,
  ``[::1]:9100``).
- Both compare names case-insensitively: the kubelet lowercases the hostname it registers as the node.
- InternalIP: a label holds the node's address (``:port`` stripped), looked up in the addresses the
  caller collected from Node objects.

Series that map to no known node, and nodes with more than one series, are reported, never merged: two
values for one node mean the query or the identity is wrong, and guessing would hide it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import ipaddress
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from promsched.api.policies import NodeIdentity as NodeIdentitySpec
from promsched.api.policies import NodeIdentitySource
from promsched.metrics import promql
from promsched.metrics.errors import PrometheusError
from promsched.metrics.offloading import off_loop_then_let_go, paced
from promsched.metrics.querying import PrometheusClient
from promsched.metrics.samples import QueryResult, Series

EXAMPLES_KEPT = 20  # series quoted per report list; the counts stay exact

# max by (...) collapses node_uname_info scraped by several jobs into one series per instance.
UNAME_QUERY = "max by (instance, nodename) (node_uname_info)"


def strip_port(address: str) -> str:
    """``host:port`` -> ``host``, ``[v6]:port`` -> ``v6``; a bare IPv6 address is kept whole."""
    if address.startswith("["):
        end = address.find("]")
        return address[1:end] if end > 0 else address
    host, colon, port = address.rpartition(":")
    if colon and host and ":" not in host and port.isdigit():
        return host
    return address


def _canonical_address(address: str) -> str:
    # fd00:0::1 and fd00::1 are one address; compare them in one spelling.
    try:
        return ipaddress.ip_address(address).compressed
    except ValueError:
        return address


@dataclass(frozen=True)
class NodeDirectory:
    """The nodes series may belong to; `addresses` (InternalIP -> node name) serves InternalIP identity,
    `hostnames` (instance -> node_uname_info's nodename) UnameNodename."""

    names: frozenset[str]
    addresses: Mapping[str, str] = field(default_factory=dict)
    hostnames: Mapping[str, str] = field(default_factory=dict)
    # Every instance node_uname_info named, those given two nodenames (left out of `hostnames`) too.
    uname_instances: frozenset[str] = frozenset()

    @functools.cached_property
    def _by_address(self) -> Mapping[str, str]:
        # Built on first use (InternalIP only): 15 ms at 5000 nodes, not to be paid by every directory.
        return {_canonical_address(address): node for address, node in self.addresses.items()}

    @classmethod
    def of(cls, names: Iterable[str], addresses: Mapping[str, str] | None = None) -> NodeDirectory:
        return cls(frozenset(names), dict(addresses or {}))

    def node_at(self, address: str) -> str | None:
        return self._by_address.get(_canonical_address(address))

    def with_hostnames(self, uname: QueryResult) -> NodeDirectory:
        """This directory with the hostnames `UNAME_QUERY` answered. An instance given two nodenames
        gets neither: its series are reported, not guessed (Prometheus's join refused such a match)."""
        hostnames: dict[str, str] = {}
        ambiguous: set[str] = set()
        for series in paced(uname.series):
            instance, nodename = series.labels.get("instance"), series.labels.get("nodename")
            if instance is None or nodename is None:
                continue
            if hostnames.setdefault(instance, nodename) != nodename:
                ambiguous.add(instance)
        uname_instances = frozenset(hostnames)
        for instance in ambiguous:
            del hostnames[instance]
        return dataclasses.replace(self, hostnames=hostnames, uname_instances=uname_instances)


@dataclass(frozen=True)
class Hostnames:
    """node_uname_info's answer kept for the refreshes after the one that asked: `directory` is the
    directory it was asked for, with its hostnames."""

    directory: NodeDirectory
    asked_at: float

    def usable_for(self, directory: NodeDirectory, at: float, stale_after: float) -> bool:
        """Whether these may map the series of a refresh at `at` over `directory`'s nodes: asked less
        than staleAfter before, for the same nodes at the same InternalIPs (a node replaced, maybe at an
        address another node had, is asked about afresh)."""
        asked_for = self.directory
        return (
            at - self.asked_at < stale_after
            and asked_for.names == directory.names
            and asked_for.addresses == directory.addresses
        )

    def cover(self, result: QueryResult) -> bool:
        """Whether node_uname_info named every instance `result` answers for (a series without one
        maps to no node whatever it says)."""
        named = self.directory.uname_instances
        for series in (*result.series, *result.non_finite):
            instance = series.labels.get("instance")
            if instance is not None and instance not in named:
                return False
        return True


async def resolve_hostnames(client: PrometheusClient, directory: NodeDirectory, at: float) -> NodeDirectory:
    """`directory` with the hostnames Prometheus's node_uname_info gives at `at`; raises PrometheusError.
    Ask once per refresh (or rebalance cycle) for every plugin that maps through them."""
    uname = await client.query(UNAME_QUERY, at=at)
    return await off_loop_then_let_go(directory.with_hostnames, uname)


class RoundHostnames:
    """The hostnames one round of queries (a refresh's plugins, a rebalance cycle's thresholds) maps
    through: those `kept` by the last refresh while `Hostnames.usable_for` this round and covering an
    answer, else node_uname_info asked now, once for the whole round (at once, beside the round's own
    queries, when none are kept). At 5000 nodes its answer is a refresh's largest, and costs Prometheus a
    tenth of a refresh (`python -m bench.query_cost`). `finished` hears how long asking took and whether
    it failed. `cancel` once the round is over."""

    def __init__(
        self,
        client: PrometheusClient,
        directory: NodeDirectory,
        at: float,
        kept: Hostnames | None,
        stale_after: float,
        finished: Callable[[float, PrometheusError | None], None] = lambda _seconds, _error: None,
    ) -> None:
        self._client, self._directory, self._at, self._finished = client, directory, at, finished
        self._kept = kept if kept is not None and kept.usable_for(directory, at, stale_after) else None
        self._asked: asyncio.Future[Hostnames | PrometheusError] | None = None
        if self._kept is None:
            self._ask()

    def _ask(self) -> asyncio.Future[Hostnames | PrometheusError]:
        if self._asked is None:
            self._asked = asyncio.ensure_future(self._asking())
        return self._asked

    async def _asking(self) -> Hostnames | PrometheusError:
        """node_uname_info's hostnames, or the error each query needing them reports."""
        started = time.monotonic()
        try:
            resolved = await resolve_hostnames(self._client, self._directory, self._at)
        except PrometheusError as error:
            self._finished(time.monotonic() - started, error)
            return error
        self._finished(time.monotonic() - started, None)
        return Hostnames(resolved, self._at)

    async def directory_for(self, result: QueryResult) -> NodeDirectory | PrometheusError:
        """The directory to map `result`'s series by: the kept hostnames' if they name its every instance."""
        if self._kept is not None and self._kept.cover(result):
            return self._kept.directory
        asked = await self._ask()
        return asked if isinstance(asked, PrometheusError) else asked.directory

    def kept_on(self) -> Hostnames | None:
        """What a snapshot keeps for the next refresh: those asked now if they came, else the kept."""
        asked = self._asked
        if asked is not None and asked.done() and not asked.cancelled():
            answer = asked.result()
            if isinstance(answer, Hostnames):
                return answer
        return self._kept

    def cancel(self) -> None:
        if self._asked is not None:
            self._asked.cancel()  # done by now, unless the round itself was cancelled


@dataclass(frozen=True)
class NodeIdentity:
    source: NodeIdentitySource
    label: str = "instance"

    @classmethod
    def from_spec(cls, spec: NodeIdentitySpec) -> NodeIdentity:
        return cls(spec.source, spec.label or "instance")

    # Cached: `node_of` reads both for every series of every refresh.
    @functools.cached_property
    def uses_hostnames(self) -> bool:
        """Whether series are mapped through node_uname_info (`NodeDirectory.with_hostnames`)."""
        return self.source is NodeIdentitySource.UNAME_NODENAME

    @functools.cached_property
    def node_label(self) -> str:
        """The label a query must keep (aggregate ``by``): it names, addresses or (UnameNodename, as
        ``instance``) leads to the node."""
        return "instance" if self.uses_hostnames else self.label

    def node_of(self, labels: Mapping[str, str], directory: NodeDirectory) -> str | None:
        value = labels.get(self.node_label)
        if value is None:
            return None
        if self.source is NodeIdentitySource.INTERNAL_IP:
            return directory.node_at(strip_port(value))
        if self.uses_hostnames:
            hostname = directory.hostnames.get(value)
            if hostname is None:
                return None
            name = hostname
        else:
            name = strip_port(value)
        # The kubelet registers its hostname lowercased (a Node's name is a lowercase DNS subdomain):
        # host `Worker-01` is node `worker-01`.
        return name if name in directory.names else name.lower()


@dataclass(frozen=True, slots=True)
class SeriesReport:
    """What a query returned that could not be used, as short readable strings."""

    unmatched: tuple[str, ...] = ()  # series for no known node (first EXAMPLES_KEPT)
    unmatched_count: int = 0
    duplicate_nodes: tuple[str, ...] = ()  # nodes with more than one series, left without a value
    non_finite: tuple[str, ...] = ()  # series whose value was NaN or ±Inf (first EXAMPLES_KEPT)
    non_finite_count: int = 0
    warnings: tuple[str, ...] = ()  # Prometheus's warnings for the query

    @property
    def clean(self) -> bool:
        return not (self.unmatched_count or self.duplicate_nodes or self.non_finite_count or self.warnings)


@dataclass(frozen=True, slots=True)
class Assignment:
    by_node: Mapping[str, Series]
    report: SeriesReport


def _describe(series: Series, identity: NodeIdentity, directory: NodeDirectory) -> str:
    value = series.labels.get(identity.node_label)
    if value is None:
        labels = ",".join(f"{name}={promql.quote(text)}" for name, text in sorted(series.labels.items()))
        return f"no {identity.node_label} label: {{{labels}}}"
    if identity.uses_hostnames:
        hostname = directory.hostnames.get(value)
        if hostname is None:
            return f"instance={promql.quote(value)} (no single nodename in node_uname_info)"
        return f"nodename={promql.quote(hostname)}"
    return f"{identity.node_label}={promql.quote(value)}"


def assign_nodes(result: QueryResult, identity: NodeIdentity, directory: NodeDirectory) -> Assignment:
    """The query's series keyed by node name, and a report of those that were not usable."""
    by_node: dict[str, Series] = {}
    duplicates: set[str] = set()
    unmatched: list[str] = []
    for series in paced(result.series):
        node = identity.node_of(series.labels, directory)
        if node is None or node not in directory.names:
            unmatched.append(_describe(series, identity, directory))
        elif node in by_node:
            duplicates.add(node)
        else:
            by_node[node] = series
    for node in duplicates:
        del by_node[node]
    non_finite = [
        f"{_describe(series, identity, directory)} = {series.value}" for series in result.non_finite
    ]
    report = SeriesReport(
        unmatched=tuple(unmatched[:EXAMPLES_KEPT]),
        unmatched_count=len(unmatched),
        duplicate_nodes=tuple(sorted(duplicates)),
        non_finite=tuple(non_finite[:EXAMPLES_KEPT]),
        non_finite_count=len(non_finite),
        warnings=result.warnings,
    )
    return Assignment(by_node=by_node, report=report)
