"""What the scheduler knows of the cluster: nodes, what each node's pods request, and pods in flight.

A pod counts on its node from the moment the scheduler assumes it there (before its binding is sent)
until it is deleted or finishes, so two pods can never be given the last slot of a node. A binding that
fails forgets the assumption. Pods bound by anyone (kube-scheduler, a user setting nodeName) count too.

The pods counted on each node are kept with their labels and affinity terms, indexed by label and by
the rules they carry, for the inter-pod and spreading filters; with them the namespaces' labels (for
namespace selectors) and, in `VolumeObjects`, the claims, volumes and storage classes the volume filters
read.

Placements are also remembered with their time, for the herd effect: a pod placed recently adds the
part of its estimated usage the metrics do not show yet to its node's load (see
`herding` and `estimating`).
A placement's time is when the scheduler assumed the pod, or when the pod started if it was bound by
someone else (a pod found running at start-up has been in the metrics for long).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from promsched.metrics.identifying import NodeDirectory
from promsched.scheduling.cluster.change_feeds import ChangeFeed
from promsched.scheduling.cluster.placement_indexes import PlacementIndexes
from promsched.scheduling.cluster.volume_objects import VolumeObjects
from promsched.scheduling.objects.disruption_budgets import DisruptionBudget
from promsched.scheduling.objects.node_usages import NodeUsage
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.selectors import LabelSelector

_NO_LABELS: Mapping[str, str] = MappingProxyType({})

# Placements older than this no longer matter to any snapshot, unless a policy's metric windows are
# longer: the scheduler raises `ClusterCache.placement_memory` for those.
PLACEMENT_MEMORY_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class Placement:
    at: float
    uid: str
    pod: PodInfo  # its load is estimated from it (`estimating.Estimates`)


@dataclass
class ClusterCache(VolumeObjects):
    clock: Callable[[], float] = time.time
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    usage: dict[str, NodeUsage] = field(default_factory=dict)
    # uid -> (node, pod) for every pod counted on a node, bound or assumed.
    counted: dict[str, tuple[str, PodInfo]] = field(default_factory=dict)
    assumed: set[str] = field(default_factory=set)
    placements: dict[str, deque[Placement]] = field(default_factory=dict)  # per node, oldest first
    # The nodes whose placements changed, so what is derived from them (the herd load) can be kept.
    placement_changes: ChangeFeed = field(default_factory=ChangeFeed)
    # The nodes whose object changed, and those whose counted pods did: what the filters read of them.
    node_changes: ChangeFeed = field(default_factory=ChangeFeed)
    usage_changes: ChangeFeed = field(default_factory=ChangeFeed)
    placement_memory: float = PLACEMENT_MEMORY_SECONDS
    # node -> uid -> pod: the counted pods of each node.
    node_pods: dict[str, dict[str, PodInfo]] = field(default_factory=dict)
    # label key -> value -> uids of the counted pods carrying it, to find a selector's pods quickly.
    label_index: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    # Derived from the above for pods with placement rules (spreading, pod anti-affinity).
    indexes: PlacementIndexes = field(default_factory=PlacementIndexes)
    # Counted pods with required anti-affinity (they keep matching pods out of their domains), by a label
    # a pod must carry for one of their terms to match it: (key, value) -> uids. Under None, the pods
    # with a term that requires no label value.
    repelling: dict[tuple[str, str] | None, set[str]] = field(default_factory=dict)
    # uid -> node of counted pods with terms that weigh in other pods' scores: required affinity and
    # preferred terms.
    with_scored_terms: dict[str, str] = field(default_factory=dict)
    # (namespace, claim) -> how many counted pods name it in a persistentVolumeClaim volume.
    claim_users: Counter[tuple[str, str]] = field(default_factory=Counter)
    # node -> uid -> the counted pods of the node with claims: whose volumes count against its CSINode.
    claim_pods: dict[str, dict[str, PodInfo]] = field(default_factory=dict)
    namespace_labels: dict[str, Mapping[str, str]] = field(default_factory=dict)
    budgets: dict[tuple[str, str], DisruptionBudget] = field(default_factory=dict)
    # node -> uid -> pending pod nominated to it (kube's nominator): their room is held for them.
    nominated: dict[str, dict[str, PodInfo]] = field(default_factory=dict)
    nominations: dict[str, str] = field(default_factory=dict)  # uid -> node, for the above
    # The pods promsched evicted to preempt, until they are gone: the Eviction API writes its own reason
    # (EvictionByEvictionAPI) over the DisruptionTarget condition that marks them as preemption's.
    preempted: set[str] = field(default_factory=set)

    def usage_of(self, node: str) -> NodeUsage:
        usage = self.usage.get(node)
        if usage is None:
            usage = self.usage[node] = NodeUsage()
        return usage

    def directory(self) -> NodeDirectory:
        """The nodes metric series may belong to, with their InternalIPs (for InternalIP identity)."""
        addresses = {
            node.addresses["InternalIP"]: node.name
            for node in self.nodes.values()
            if node.addresses.get("InternalIP")
        }
        return NodeDirectory.of(self.nodes, addresses)

    def upsert_node(self, node: NodeInfo) -> bool:
        """Store the node; True when something that matters to scheduling changed (not a heartbeat)."""
        previous = self.nodes.get(node.name)
        self.nodes[node.name] = node
        self.node_changes.mark(node.name)
        return previous is None or replace(previous, resource_version=node.resource_version) != node

    def remove_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self.node_changes.mark(name)
        if self.placements.pop(name, None):
            self.placement_changes.mark(name)
        # Its pods stay counted under its name: they are deleted by the garbage collector, not by us.

    def _count(self, node: str, pod: PodInfo) -> None:
        uid = pod.uid
        self.counted[uid] = (node, pod)
        self.usage_of(node).add(pod)
        self.usage_changes.mark(node)
        self.node_pods.setdefault(node, {})[uid] = pod
        for key, value in pod.labels.items():
            self.label_index.setdefault(key, {}).setdefault(value, set()).add(uid)
        for label in _repelled_labels(pod):
            self.repelling.setdefault(label, set()).add(uid)
        terms = pod.pod_affinity
        if terms.required or terms.preferred or terms.preferred_anti:
            self.with_scored_terms[uid] = node
        self.claim_users.update(_named_claims(pod))
        if pod.claims:
            self.claim_pods.setdefault(node, {})[uid] = pod

    def _uncount(self, uid: str) -> str | None:
        entry = self.counted.pop(uid, None)
        if entry is None:
            return None
        node, pod = entry
        self.usage_of(node).remove(pod)
        self.usage_changes.mark(node)
        self.assumed.discard(uid)
        on_node = self.node_pods.get(node)
        if on_node is not None:
            on_node.pop(uid, None)
            if not on_node:
                del self.node_pods[node]
        for key, value in pod.labels.items():
            by_value = self.label_index[key]
            holders = by_value[value]
            holders.discard(uid)
            if not holders:
                del by_value[value]
                if not by_value:
                    del self.label_index[key]
        self.with_scored_terms.pop(uid, None)
        for label in _repelled_labels(pod):
            repelled = self.repelling.get(label)
            if repelled is not None:
                repelled.discard(uid)
                if not repelled:
                    del self.repelling[label]
        for claim in _named_claims(pod):
            self.claim_users[claim] -= 1
            if self.claim_users[claim] <= 0:
                del self.claim_users[claim]
        with_claims = self.claim_pods.get(node)
        if with_claims is not None:
            with_claims.pop(uid, None)
            if not with_claims:
                del self.claim_pods[node]
        return node

    def observe_pod(self, pod: PodInfo) -> bool:
        """Account a pod as its latest state says; True when this freed resources on a node."""
        current = self.counted.get(pod.uid)
        if pod.node_name and not pod.is_terminal:
            if current is not None and current[0] == pod.node_name:
                # Bound where we assumed it (or already counted): it is no longer in flight.
                self.assumed.discard(pod.uid)
                held = current[1]
                if held.same_state(pod):
                    return False
                if held.counts_alike(pod):
                    # Its binding, or its status as the kubelet reports it (Running, its start): counted
                    # as it was, and held in its latest state.
                    self._restate(pod.node_name, held, pod)
                else:
                    # Labels, requests and the like may change on a bound pod (a relabelling, a resize).
                    self._uncount(pod.uid)
                    self._count(pod.node_name, pod)
                    self._replace_placed(pod.node_name, held, pod)
                return False
            freed = self._release(pod.uid)
            self._count(pod.node_name, pod)
            self._remember(pod.node_name, pod, pod.started_at)
            return freed
        if pod.uid in self.assumed and not pod.is_terminal:
            return False  # our binding is in flight; the pod's watch event has not caught up
        # Unbound, or finished: a pod seen finished before its binding was (a missed event) no
        # longer needs the room assumed for it.
        return self._release(pod.uid)

    def _restate(self, node: str, held: PodInfo, pod: PodInfo) -> None:
        """Hold `pod`'s latest state where its last one (`held`) is held, when it counts alike: what is
        counted and indexed of it is unchanged, so no node's usage changes."""
        uid = pod.uid
        self.counted[uid] = (node, pod)
        self.node_pods[node][uid] = pod
        if pod.claims:
            self.claim_pods[node][uid] = pod
        self._replace_placed(node, held, pod)

    def pods_selected_by(self, selector: LabelSelector) -> Iterator[tuple[str, PodInfo]]:
        """(node, pod) for each counted pod whose labels `selector` matches, in any namespace. A selector
        that requires some label values is looked up in the label index instead of checking every pod."""
        if selector.selects_nothing:
            return
        candidates: set[str] | None = None
        for key, values in selector.equality_keys():
            by_value = self.label_index.get(key, {})
            if len(values) == 1:
                holders = by_value.get(next(iter(values)), set())
            else:
                holders = set().union(*(by_value.get(value, ()) for value in values))
            if candidates is None or len(holders) < len(candidates):
                candidates = holders
        counted = self.counted
        # A selector of one In requirement is matched by every candidate the index gave for it.
        matched = candidates is not None and len(selector.requirements) == 1
        for uid in counted if candidates is None else candidates:
            node, pod = counted[uid]
            if matched or selector.matches(pod.labels):
                yield node, pod

    def pods_that_may_repel(self, labels: Mapping[str, str]) -> set[str]:
        """The uids of counted pods with a required anti-affinity term a pod with `labels` may match;
        the terms of all other pods need a label value it does not have."""
        found = set(self.repelling.get(None, ()))
        for label in labels.items():
            found.update(self.repelling.get(label, ()))
        return found

    def labels_of_namespace(self, namespace: str) -> Mapping[str, str]:
        return self.namespace_labels.get(namespace, _NO_LABELS)

    def upsert_namespace(self, name: str, labels: Mapping[str, str]) -> bool:
        """Store a namespace's labels; True when an existing namespace's labels changed (a namespace
        selector may match differently). A new namespace holds no pods yet, so it changes no match."""
        previous = self.namespace_labels.get(name)
        self.namespace_labels[name] = MappingProxyType(dict(labels))
        return previous is not None and previous != labels

    def remove_namespace(self, name: str) -> None:
        self.namespace_labels.pop(name, None)

    def upsert_budget(self, budget: DisruptionBudget) -> None:
        self.budgets[(budget.namespace, budget.name)] = budget

    def remove_budget(self, namespace: str, name: str) -> None:
        self.budgets.pop((namespace, name), None)

    def nominate(self, pod: PodInfo, node: str | None = None) -> None:
        """Hold `node` (the pod's own nominatedNodeName by default) for a pending pod. As kube's
        nominator, a pod seen without a nominated node keeps the one held in memory (its watch event may
        predate the nomination); `node=""` clears it."""
        if node is None:
            node = pod.nominated_node_name or self.nominations.get(pod.uid, "")
        self.unnominate(pod.uid)
        if node:
            self.nominations[pod.uid] = node
            self.nominated.setdefault(node, {})[pod.uid] = pod

    def unnominate(self, uid: str) -> None:
        node = self.nominations.pop(uid, None)
        if node is not None:
            held = self.nominated[node]
            del held[uid]
            if not held:
                del self.nominated[node]

    def remove_pod(self, uid: str) -> bool:
        """The pod is gone; True when it had been counted on a node."""
        self.preempted.discard(uid)
        return self._release(uid)

    def _release(self, uid: str) -> bool:
        """The pod no longer loads its node (deleted, finished, its binding failed): uncount it and
        forget its placement, whose load the metrics will not show. True when it had been counted."""
        node = self._uncount(uid)
        if node is None:
            return False
        placements = self.placements.get(node)
        if placements and any(placement.uid == uid for placement in placements):
            kept = deque(placement for placement in placements if placement.uid != uid)
            if kept:
                self.placements[node] = kept
            else:
                del self.placements[node]
            self.placement_changes.mark(node)
        return True

    def assume(self, pod: PodInfo, node: str) -> None:
        self.unnominate(pod.uid)  # placed: it no longer holds room elsewhere (kube's assume)
        self._count(node, pod)
        self.assumed.add(pod.uid)
        self._remember(node, pod)

    def forget(self, uid: str) -> None:
        """A binding failed: the pod no longer counts where it was assumed."""
        if uid in self.assumed:
            self._release(uid)

    def _remember(self, node: str, pod: PodInfo, at: float | None = None) -> None:
        now = self.clock()
        oldest = now - self.placement_memory
        at = now if at is None else min(at, now)
        placements = self.placements.setdefault(node, deque())
        while placements and placements[0].at < oldest:
            placements.popleft()
        if at >= oldest:
            placement = Placement(at, pod.uid, pod)
            # Kept in time order; a pod that started earlier than the latest placement is rare.
            position = len(placements)
            while position and placements[position - 1].at > at:
                position -= 1
            placements.insert(position, placement)
        if not placements:
            del self.placements[node]
        self.placement_changes.mark(node)

    def _replace_placed(self, node: str, held: PodInfo, pod: PodInfo) -> None:
        """The pod's placement holds its latest state, not the one it was placed in (a pod placed holds
        no other copy of it for the placement's lifetime); what is estimated from it changed only if its
        requests, limits or owner did."""
        placements = self.placements.get(node) or deque()
        for position in range(len(placements) - 1, -1, -1):  # newest first: most were placed just now
            placement = placements[position]
            if placement.uid == pod.uid:
                placements[position] = Placement(placement.at, placement.uid, pod)
                if _estimated_from(held) != _estimated_from(pod):
                    self.placement_changes.mark(node)
                return

    def placements_after(self, node: str, since: float) -> Iterator[Placement]:
        """The node's placements later than `since`, newest first."""
        for placement in reversed(self.placements.get(node, ())):
            if placement.at <= since:
                return
            yield placement


def _repelled_labels(pod: PodInfo) -> list[tuple[str, str] | None]:
    """Where `ClusterCache.repelling` files the pod: for each required anti-affinity term, the values of
    its first required label, or None for a term that requires none."""
    labels: list[tuple[str, str] | None] = []
    for term in pod.pod_affinity.required_anti:
        if term.selector.selects_nothing:
            continue
        required = term.selector.equality_keys()
        if required:
            key, values = required[0]
            labels.extend((key, value) for value in values)
        else:
            labels.append(None)
    return labels


def _estimated_from(pod: PodInfo) -> tuple[object, ...]:
    """What `estimating.Estimates.of` reads of a pod."""
    return pod.namespace, pod.controller, pod.requests, pod.limits


def _named_claims(pod: PodInfo) -> list[tuple[str, str]]:
    """The claims a pod names itself; an ephemeral volume's claim belongs to its pod alone."""
    return [(pod.namespace, claim.name) for claim in pod.claims if not claim.ephemeral]
