"""VolumeBinding for claims that wait for their first consumer: which volume a claim would get on each
node, when it must be provisioned and where it can be, in kube-scheduler's words."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.binding.prebinding import VolumeBinder
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.filters.volume_binding import plan_for, pod_volume_claims
from promsched.scheduling.filters.volume_binding_plans import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    NOT_ENOUGH_SPACE,
    VOLUME_MISSING,
    PodVolumeClaims,
    find_pod_volumes,
)
from promsched.scheduling.framework import ClusterEvent, Status
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.storage_capacities import CSIDriverInfo, StorageCapacityInfo
from promsched.scheduling.objects.volumes import ClaimInfo, VolumeInfo
from support.fake_apis import FakeSender
from support.objects import ZONE, claim_object, node, pod, volume_object
from support.placement import cache_with, decide_evenly
from support.volume_objects import (
    DRIVER,
    DYNAMIC,
    allowed_zones,
    available_volume,
    csi_driver,
    storage_capacity,
    waiting_claim,
    waiting_class,
)

NODES = [node("n1", "zone-a"), node("n2", "zone-b"), node("n3", "zone-c")]


def using(*claims: str, name: str = "app") -> PodInfo:
    volumes = [
        {"name": f"v{index}", "persistentVolumeClaim": {"claimName": c}} for index, c in enumerate(claims)
    ]
    return pod(name, volumes=volumes)


def local_cache(claims: list[dict[str, Any]], volumes: list[dict[str, Any]], **options: Any) -> ClusterCache:
    classes = options.pop("storage_classes", [waiting_class()])
    return cache_with(NODES, claims=claims, volumes=volumes, storage_classes=classes, **options)


def with_csi(cache: ClusterCache, driver: dict[str, Any], *capacities: dict[str, Any]) -> ClusterCache:
    cache.upsert_csi_driver(CSIDriverInfo.from_object(driver))
    for capacity in capacities:
        cache.upsert_storage_capacity(StorageCapacityInfo.from_object(capacity))
    return cache


def test_a_claim_goes_where_an_available_local_volume_is() -> None:
    cache = local_cache([waiting_claim()], [available_volume("pv-2", "n2"), available_volume("pv-3", "n3")])
    outcome = decide_evenly(using("data"), cache)
    assert outcome.node in ("n2", "n3")
    assert outcome.filtered == {BIND_CONFLICT: 1}


def test_no_volume_and_no_provisioner_fits_no_node_with_kubes_message() -> None:
    outcome = decide_evenly(using("data"), local_cache([waiting_claim()], []))
    assert outcome.node is None
    assert outcome.filtered == {BIND_CONFLICT: 3}
    assert outcome.message.startswith(
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
    )
    # A volume, claim, class or storage capacity added or changed, or a node, may let it fit.
    for event in (
        ClusterEvent.VOLUME_CHANGED,
        ClusterEvent.STORAGE_CAPACITY_CHANGED,
        ClusterEvent.NODE_UPDATED,
    ):
        assert outcome.lifted_by & event


def test_the_smallest_volume_that_holds_the_claim_is_chosen() -> None:
    volumes = [
        available_volume("pv-5g", "n1", size="5Gi"),
        available_volume("pv-2g", "n1", size="2Gi"),
        available_volume("pv-small", "n1", size="512Mi"),
    ]
    cache = local_cache([waiting_claim(size="1Gi")], volumes)
    plan = plan_for(using("data"), cache, cache.nodes["n1"])
    assert [binding.volume.name for binding in plan.bindings] == ["pv-2g"]
    assert plan.provisions == ()


def test_smaller_claims_choose_first_and_no_volume_is_given_twice() -> None:
    claims = [waiting_claim("big", size="3Gi"), waiting_claim("small", size="1Gi")]
    volumes = [available_volume("pv-4g", "n1", size="4Gi"), available_volume("pv-3g", "n1", size="3Gi")]
    cache = local_cache(claims, volumes)
    plan = plan_for(using("big", "small"), cache, cache.nodes["n1"])
    # "small" takes the 3Gi volume first, as kube sorts claims by size; "big" then gets the 4Gi one.
    assert {b.claim.name: b.volume.name for b in plan.bindings} == {"small": "pv-3g", "big": "pv-4g"}
    one_volume = local_cache(claims, volumes[:1])
    assert decide_evenly(using("big", "small"), one_volume).filtered == {BIND_CONFLICT: 3}


def test_a_claim_two_volumes_use_is_bound_once() -> None:
    cache = local_cache([waiting_claim()], [available_volume("pv-1", "n1"), available_volume("pv-2", "n1")])
    plan = plan_for(using("data", "data"), cache, cache.nodes["n1"])
    assert [binding.volume.name for binding in plan.bindings] == ["pv-1"]


@pytest.mark.parametrize(
    "volume",
    [
        available_volume("pv", "n1", size="512Mi"),
        available_volume("pv", "n1", storage_class="other"),
        available_volume("pv", "n1", accessModes=["ReadOnlyMany"]),
        available_volume("pv", "n1", volumeMode="Block"),
        available_volume("pv", "n1", phase="Released"),
        available_volume("pv", "n1", volumeAttributesClassName="gold"),
        available_volume("pv", "n1", claimRef={"namespace": "ns", "name": "someone-else"}),
        {
            **available_volume("pv", "n1"),
            "metadata": {"name": "pv", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        },
        available_volume("pv", "n1", labels={"tier": "slow"}),
    ],
    ids=[
        "too-small",
        "other-class",
        "access-modes",
        "volume-mode",
        "not-available",
        "attributes-class",
        "claimed-by-another",
        "deleting",
        "selector",
    ],
)
def test_a_volume_that_does_not_match_the_claim_is_not_bound_to_it(volume: dict[str, Any]) -> None:
    claim = waiting_claim(selector={"matchLabels": {"tier": "fast"}})
    matching = available_volume("pv", "n1", labels={"tier": "fast"})
    assert decide_evenly(using("data"), local_cache([claim], [matching])).node == "n1"
    assert decide_evenly(using("data"), local_cache([claim], [volume])).filtered == {BIND_CONFLICT: 3}


def test_a_volume_pre_bound_to_the_claim_wins_over_a_smaller_one_and_only_where_it_is_reachable() -> None:
    pre_bound = available_volume(
        "pv-mine", "n2", size="8Gi", claimRef={"namespace": "ns", "name": "data", "uid": "uid-claim-data"}
    )
    cache = local_cache([waiting_claim()], [pre_bound, available_volume("pv-other", "n2")])
    plan = plan_for(using("data"), cache, cache.nodes["n2"])
    assert [binding.volume.name for binding in plan.bindings] == ["pv-mine"]
    # Pre-bound yet unreachable from n1: no other volume is looked at there.
    cache.upsert_volume(VolumeInfo.from_object(available_volume("pv-other", "n1", version=2)))
    assert decide_evenly(using("data"), cache).filtered == {BIND_CONFLICT: 2}


def test_a_claim_without_a_volume_is_provisioned_on_nodes_its_class_allows() -> None:
    zonal = waiting_class(DYNAMIC, DRIVER, allowedTopologies=allowed_zones(ZONE, "zone-a", "zone-b"))
    cache = local_cache([waiting_claim(storage_class=DYNAMIC)], [], storage_classes=[zonal])
    outcome = decide_evenly(using("data"), cache)
    assert outcome.filtered == {BIND_CONFLICT: 1}
    assert outcome.node in ("n1", "n2")
    plan = plan_for(using("data"), cache, cache.nodes["n1"])
    assert plan.bindings == ()
    assert [claim.name for claim in plan.provisions] == ["data"]


@pytest.mark.parametrize(
    "terms",
    [
        [{"matchLabelExpressions": []}],
        [{"matchLabelExpressions": [{"key": ZONE, "values": []}]}],
    ],
    ids=["empty-term", "no-values"],
)
def test_an_allowed_topology_term_that_selects_nothing_allows_no_node(terms: list[dict[str, Any]]) -> None:
    zonal = waiting_class(DYNAMIC, DRIVER, allowedTopologies=terms)
    cache = local_cache([waiting_claim(storage_class=DYNAMIC)], [], storage_classes=[zonal])
    assert decide_evenly(using("data"), cache).filtered == {BIND_CONFLICT: 3}


def test_storage_capacity_limits_provisioning_where_the_driver_publishes_it() -> None:
    classes = [waiting_class(DYNAMIC, DRIVER)]
    capacities = (
        storage_capacity("a", ZONE, "zone-a", capacity="10Gi"),
        # maximumVolumeSize is more precise than capacity, and wins.
        storage_capacity("b", ZONE, "zone-b", capacity="10Gi", maximum="512Mi"),
        storage_capacity("c", ZONE, "zone-c", capacity="10Gi", storage_class="another-class"),
    )
    cache = with_csi(
        local_cache([waiting_claim(storage_class=DYNAMIC)], [], storage_classes=classes),
        csi_driver(),
        *capacities,
    )
    outcome = decide_evenly(using("data"), cache)
    assert outcome.node == "n1"
    assert outcome.filtered == {NOT_ENOUGH_SPACE: 2}
    # A driver that does not declare storageCapacity is not limited by what it publishes.
    cache.upsert_csi_driver(CSIDriverInfo.from_object(csi_driver(storage_capacity=False)))
    assert decide_evenly(using("data"), cache).filtered == {}
    # Nor is a claim that requests no size.
    cache.upsert_csi_driver(CSIDriverInfo.from_object(csi_driver()))
    cache.upsert_claim(ClaimInfo.from_object(waiting_claim(storage_class=DYNAMIC, size=None, version=2)))
    assert decide_evenly(using("data"), cache).filtered == {}


def test_a_claim_being_provisioned_for_one_node_fits_no_other() -> None:
    classes = [waiting_class(DYNAMIC, DRIVER)]
    claim = waiting_claim(storage_class=DYNAMIC, selected_node="n3")
    outcome = decide_evenly(using("data"), local_cache([claim], [], storage_classes=classes))
    assert outcome.node == "n3"
    assert outcome.filtered == {BIND_CONFLICT: 2}


def test_a_bound_volume_and_a_waiting_claim_both_confine_the_pod() -> None:
    claims = [claim_object("old", "pv-old"), waiting_claim("new")]
    volumes = [volume_object("pv-old", on="n1"), available_volume("pv-new", "n2")]
    outcome = decide_evenly(using("old", "new"), local_cache(claims, volumes))
    assert outcome.node is None
    # kube lists both reasons for n2; its first, the node conflict, is the one kept.
    assert outcome.filtered == {BIND_CONFLICT: 1, NODE_CONFLICT: 2}


def test_a_bound_claim_whose_volume_is_gone_is_reported_as_kube_does() -> None:
    cache = local_cache([claim_object("old", "pv-gone")], [])
    claims = PodVolumeClaims(bound=(cache.claims[("ns", "old")],))
    found = find_pod_volumes(claims, cache.nodes["n1"], cache)
    assert isinstance(found, Status)
    assert found.reason == VOLUME_MISSING


@pytest.mark.parametrize(
    ("claim", "classes"),
    [
        (waiting_claim(storage_class=""), []),
        (waiting_claim(storage_class="missing"), []),
        (waiting_claim(), [waiting_class(volumeBindingMode="Immediate")]),
        (waiting_claim(volumeName="pv-named"), [waiting_class()]),
    ],
    ids=["no-class", "unknown-class", "immediate-class", "names-its-volume"],
)
def test_an_unbound_claim_the_controller_binds_waits_for_it(
    claim: dict[str, Any], classes: list[dict[str, Any]]
) -> None:
    cache = local_cache([claim], [available_volume("pv", "n1")], storage_classes=classes)
    outcome = decide_evenly(using("data"), cache)
    assert outcome.node is None
    assert outcome.message.startswith(
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )


def test_a_volume_assumed_for_one_pod_is_not_offered_to_the_next_until_reverted() -> None:
    claims = [waiting_claim("first"), waiting_claim("second")]
    cache = local_cache(claims, [available_volume("pv-1", "n1")])
    plan = plan_for(using("first"), cache, cache.nodes["n1"])
    binder = VolumeBinder(FakeSender(), cache)
    binder.assume(plan, "n1")
    assert cache.volume("pv-1").claim_ref is not None
    assert decide_evenly(using("second", name="next"), cache).filtered == {BIND_CONFLICT: 3}
    binder.revert(plan)
    assert decide_evenly(using("second", name="next"), cache).node == "n1"


def test_an_assumption_holds_until_the_watch_shows_a_newer_state() -> None:
    cache = local_cache([waiting_claim()], [available_volume("pv-1", "n1", version=4)])
    plan = plan_for(using("data"), cache, cache.nodes["n1"])
    VolumeBinder(FakeSender(), cache).assume(plan, "n1")
    # A late event of the same version leaves the assumption in place; a newer one replaces it.
    cache.upsert_volume(cache.volumes["pv-1"])
    assert cache.volume("pv-1").claim_ref is not None
    cache.upsert_volume(VolumeInfo.from_object(available_volume("pv-1", "n1", version=5)))
    assert cache.volume("pv-1").claim_ref is None


def test_a_claim_assumed_provisioned_on_a_node_keeps_other_pods_of_the_claim_there() -> None:
    classes = [waiting_class(DYNAMIC, DRIVER)]
    cache = local_cache([waiting_claim(storage_class=DYNAMIC)], [], storage_classes=classes)
    plan = plan_for(using("data"), cache, cache.nodes["n2"])
    VolumeBinder(FakeSender(), cache).assume(plan, "n2")
    claims = pod_volume_claims(using("data", name="sibling"), cache)
    assert isinstance(claims, PodVolumeClaims)
    assert claims.delayed[0].selected_node == "n2"
    assert decide_evenly(using("data", name="sibling"), cache).node == "n2"
