"""How many counted pods match all of a pod's required affinity terms, per topology domain, kept across
pods.

Required pod affinity counts, in each cycle, the pods that match all of its terms in the domains of each
term's key (kube's PreFilter walks every node's pods for it). In a burst of one Deployment's pods with
affinity to each other that is every pod placed so far, for each pod. The counts are kept per set of
terms and brought up to date by the nodes whose counted pods or object changed since (the cache's usage
and node change feeds), so a pod costs the nodes that changed. Terms that select namespaces by their
labels are not kept: a namespace's labels change with neither feed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from promsched.scheduling.cluster.listers import ClusterLister
from promsched.scheduling.objects.affinity_terms import AffinityTerm
from promsched.scheduling.objects.nodes import NodeInfo
from promsched.scheduling.objects.pods import PodInfo

# Sets of terms whose counts are kept (the least recently used go first): a burst has a few.
TERMS_KEPT: Final = 16

Domain = tuple[str, str]  # (topology key, a node's value of it)
# The namespace labels terms that select no namespace by their labels are given: they read none.
_UNREAD: Final[Mapping[str, str]] = MappingProxyType({})


@dataclass(slots=True)
class _Counts:
    domains: dict[Domain, int] = field(default_factory=dict)
    # node -> what its matching pods add to `domains` (a tuple: lighter than a map, held per node)
    shares: dict[str, tuple[tuple[Domain, int], ...]] = field(default_factory=dict)
    versions: tuple[int, int] = (-1, -1)  # the cache's usage and node change counts they are up to date with


class AffinityMatches:
    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[AffinityTerm, ...], _Counts] = OrderedDict()

    def domains(self, terms: tuple[AffinityTerm, ...], cache: ClusterLister) -> Mapping[Domain, int] | None:
        """(topology key, value) -> for each of `terms` (at least one), the counted pods on the cache's
        nodes that match all of them, in the term's domain of them; read-only. None when a term selects
        namespaces by their labels: such counts are not kept."""
        if not all(term.namespace_selector.selects_nothing for term in terms):
            return None
        kept = self._kept.get(terms)
        if kept is None:
            kept = self._kept[terms] = _Counts()
            if len(self._kept) > TERMS_KEPT:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(terms)
        versions = (cache.usage_changes.count, cache.node_changes.count)
        if kept.versions == versions:
            return kept.domains
        if kept.versions[0] < 0:
            # A pod that counts matches every term, so the first term's selector finds all candidates.
            changed = {node for node, _pod in cache.pods_selected_by(terms[0].selector)}
        else:
            changed = set(cache.usage_changes.since(kept.versions[0]))
            changed.update(cache.node_changes.since(kept.versions[1]))
        for name in changed:
            for domain, count in kept.shares.pop(name, ()):
                _bump(kept.domains, domain, -count)
            node = cache.nodes.get(name)
            share = _share(terms, node, cache.node_pods.get(name, {})) if node is not None else None
            if share:
                kept.shares[name] = share
                for domain, count in share:
                    _bump(kept.domains, domain, count)
        kept.versions = versions
        return kept.domains


def _share(
    terms: tuple[AffinityTerm, ...], node: NodeInfo, pods: Mapping[str, PodInfo]
) -> tuple[tuple[Domain, int], ...]:
    """What the node's pods that match all of `terms` add to their counts: one per pod, for each term
    in its domain of the node (none where the node lacks the term's key)."""
    matching = sum(
        all(term.matches(pod.namespace, pod.labels, _UNREAD) for term in terms) for pod in pods.values()
    )
    if not matching:
        return ()
    return tuple(
        ((term.topology_key, value), matching)
        for term in terms
        if (value := node.labels.get(term.topology_key)) is not None
    )


def _bump(counts: dict[Domain, int], domain: Domain, delta: int) -> None:
    """Add `delta`, dropping domains that reach zero so that an empty map means no match anywhere."""
    count = counts.get(domain, 0) + delta
    if count:
        counts[domain] = count
    else:
        counts.pop(domain, None)
