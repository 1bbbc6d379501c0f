"""The filters' queueing hints: which parked pods a cluster change wakes, judged for the filters that
declared the event (kube's QueueingHints)."""

from __future__ import annotations

from dataclasses import dataclass, field

from promsched.scheduling.filters import QUEUEING_HINTS, queueing_hints
from promsched.scheduling.filters.queueing_hints import NO_HINTS, uses_claims
from promsched.scheduling.filters.volume_restrictions import VolumeRestrictions
from promsched.scheduling.framework import ClusterChange, ClusterEvent, QueueingHint
from promsched.scheduling.objects.pod_volumes import PodClaim
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.queues import MAX_BACKOFF, SchedulingQueue
from support.clocks import Clock
from support.objects import pod, pod_info


@dataclass(frozen=True)
class Declaring:
    """A filter as the hint table reads it: its events and its hints."""

    events: ClusterEvent
    hints: dict[ClusterEvent, QueueingHint] = field(default_factory=dict)


def test_the_events_with_hints_are_those_whose_every_filter_has_one() -> None:
    assert set(QUEUEING_HINTS) == {
        ClusterEvent.ASSIGNED_POD_ADDED,
        ClusterEvent.ASSIGNED_POD_UPDATED,
        ClusterEvent.NAMESPACE_UPDATED,
        ClusterEvent.CLAIM_CHANGED,
        ClusterEvent.VOLUME_CHANGED,
        ClusterEvent.STORAGE_CLASS_CHANGED,
        ClusterEvent.STORAGE_CAPACITY_CHANGED,
        ClusterEvent.CSI_NODE_CHANGED,
        ClusterEvent.VOLUME_DETACHED,
    }
    # One hint shared by several filters is asked once.
    assert len(QUEUEING_HINTS[ClusterEvent.CLAIM_CHANGED]) == 1


def test_a_filter_declaring_an_event_without_a_hint_lets_it_wake_every_pod() -> None:
    hinted = Declaring(ClusterEvent.CLAIM_CHANGED, {ClusterEvent.CLAIM_CHANGED: uses_claims})
    unhinted = Declaring(ClusterEvent.CLAIM_CHANGED | ClusterEvent.NODE_ADDED, dict(NO_HINTS))
    assert queueing_hints([hinted]) == {ClusterEvent.CLAIM_CHANGED: (uses_claims,)}
    assert queueing_hints([hinted, unhinted]) == {}


def test_a_changed_claim_wakes_only_the_pods_that_use_it() -> None:
    clock = Clock(1000.0)
    queue = SchedulingQueue(clock=clock)
    for name, claim in (("web", "data"), ("db", "logs")):
        queue.add_or_update(pod_info(name, claims=(PodClaim("spec.volumes[0]", claim),)))
        queue.pop_nowait()
        queue.unschedulable(f"uid-{name}", VolumeRestrictions.events)
    clock.now += MAX_BACKOFF
    assert queue.move_all_to_active("claim changed", ClusterEvent.CLAIM_CHANGED, ClusterChange()) == 0
    change = ClusterChange(claim=("ns", "data"))
    assert queue.move_all_to_active("claim changed", ClusterEvent.CLAIM_CHANGED, change) == 1
    woken = queue.pop_nowait()
    assert woken is not None
    assert woken.pod.name == "web"


def test_a_placed_pod_wakes_the_pods_whose_affinity_finds_it_or_whose_spreading_counts_it() -> None:
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]  # fmt: skip
    near_cache = pod("near-cache", affinity=affinity)
    spread_web = pod("spread-web", topologySpreadConstraints=spread)
    [hint_a, hint_b] = QUEUEING_HINTS[ClusterEvent.ASSIGNED_POD_ADDED]

    def wakes(waiting_pod: PodInfo, placed_labels: dict[str, str]) -> bool:
        change = ClusterChange(pod("placed", labels=placed_labels))
        return any(hint(waiting_pod, change) for hint in (hint_a, hint_b))

    assert wakes(near_cache, {"app": "cache"})
    assert not wakes(near_cache, {"app": "web"})
    assert wakes(spread_web, {"app": "web"})
    assert not wakes(spread_web, {"app": "cache"})
