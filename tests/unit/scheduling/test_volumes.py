"""Volumes: pods go where their bound volumes are reachable, and what promsched cannot bind it refuses
naming the claim, with kube-scheduler's messages."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.volumes import ClaimInfo, VolumeInfo
from support.objects import ZONE, claim_object, node, pod, storage_class_object, volume_object
from support.placement import cache_with, decide_evenly
from support.preemption import not_helpful

NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ZONE_CONFLICT = "node(s) had no available volume zone"
IN_USE = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
NODES = [node("n1", "zone-a"), node("n2", "zone-b"), node("n3", "zone-c")]


def using(claim_name: str = "data", name: str = "app", **options: Any) -> PodInfo:
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return pod(name, volumes=volumes, **options)


def test_a_local_volume_takes_the_pod_to_its_node() -> None:
    cache = cache_with(NODES, claims=[claim_object()], volumes=[volume_object(on="n2")])
    outcome = decide_evenly(using(), cache)
    assert outcome.node == "n2"
    assert outcome.filtered == {NODE_CONFLICT: 2}


def test_a_zonal_volume_takes_the_pod_to_its_zones() -> None:
    cache = cache_with(
        [*NODES, node("bare", zone=None)],
        claims=[claim_object()],
        volumes=[volume_object(**{ZONE: "zone-c"})],
    )
    assert decide_evenly(using(), cache).filtered == {ZONE_CONFLICT: 2}
    multi = cache_with(NODES, claims=[claim_object()], volumes=[volume_object(**{ZONE: "zone-a__zone-b"})])
    assert decide_evenly(using(), multi).filtered == {ZONE_CONFLICT: 1}
    beta = cache_with(
        NODES,
        claims=[claim_object()],
        volumes=[volume_object(**{"failure-domain.beta.kubernetes.io/zone": "zone-b"})],
    )
    assert decide_evenly(using(), beta).node == "n2"


@pytest.mark.parametrize(
    ("claims", "classes", "message"),
    [
        ([], [], 'persistentvolumeclaim "data" not found'),
        ([claim_object(bound=False, volume="")], [], "pod has unbound immediate PersistentVolumeClaims"),
        (
            [claim_object(bound=False, volume="", storage_class="fast")],
            [storage_class_object("fast", "Immediate")],
            "pod has unbound immediate PersistentVolumeClaims",
        ),
        # Named by the claim but not yet bound by the controller: it waits like an immediate claim.
        ([claim_object(bound=False)], [], "pod has unbound immediate PersistentVolumeClaims"),
        (
            [{**claim_object(), "status": {"phase": "Lost"}}],
            [],
            'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-data"',
        ),
        (
            [claim_object(deletionTimestamp="2026-01-01T00:00:00Z")],
            [],
            'persistentvolumeclaim "data" is being deleted',
        ),
        ([claim_object(volume="gone")], [], 'persistentvolume "gone" not found'),
    ],
)
def test_claims_that_cannot_be_used_reject_the_pod_with_kubes_words(
    claims: list[dict[str, Any]], classes: list[dict[str, Any]], message: str
) -> None:
    cache = cache_with(NODES, claims=claims, volumes=[volume_object()], storage_classes=classes)
    outcome = decide_evenly(using(), cache)
    assert outcome.node is None
    assert outcome.message == f"0/3 nodes are available: {message}." + not_helpful(3)
    assert outcome.filtered == {message: 3}


def test_ephemeral_volumes_use_the_claim_made_for_their_pod() -> None:
    template = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    scratch = pod("app", volumes=template)
    waiting = decide_evenly(scratch, cache_with(NODES))
    assert waiting.message == (
        "0/3 nodes are available: waiting for ephemeral volume controller to create the "
        'persistentvolumeclaim "app-scratch".' + not_helpful(3)
    )
    owner = [{"controller": True, "uid": scratch.uid, "kind": "Pod", "name": "app", "apiVersion": "v1"}]
    stranger = claim_object("app-scratch", ownerReferences=[{**owner[0], "uid": "someone-else"}])
    refused = decide_evenly(scratch, cache_with(NODES, claims=[stranger], volumes=[volume_object()]))
    assert (
        refused.message
        == "0/3 nodes are available: PVC ns/app-scratch was not created for pod ns/app (pod is not owner)."
        + not_helpful(3)
    )
    owned = claim_object("app-scratch", ownerReferences=owner)
    assert (
        decide_evenly(scratch, cache_with(NODES, claims=[owned], volumes=[volume_object(on="n3")])).node
        == "n3"
    )


def test_a_read_write_once_pod_claim_in_use_keeps_every_node_out() -> None:
    exclusive = claim_object(modes=("ReadWriteOncePod",))
    cache = cache_with(
        NODES, [using(name="first", node_name="n1")], claims=[exclusive], volumes=[volume_object()]
    )
    assert decide_evenly(using(name="second"), cache).filtered == {IN_USE: 3}
    shared = cache_with(
        NODES, [using(name="first", node_name="n1")], claims=[claim_object()], volumes=[volume_object()]
    )
    assert decide_evenly(using(name="second"), shared).node is not None


def test_volume_node_affinity_is_read_as_kube_reads_it() -> None:
    by_name = volume_object()
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    by_name["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    broken = volume_object()
    broken["spec"]["nodeAffinity"] = {
        "required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "x"}]}]}
    }
    for unreachable in (by_name, broken):
        # kube matches a volume's terms against the node's labels only: a name never matches.
        info = VolumeInfo.from_object(unreachable)
        assert not any(info.reachable_from(n.labels) for n in NODES)
    assert VolumeInfo.from_object(volume_object()).reachable_from({})


def test_a_claims_class_comes_from_the_beta_annotation_first() -> None:
    annotated = claim_object(storage_class="spec-class")
    annotated["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"] = "annotated"
    assert ClaimInfo.from_object(annotated).storage_class == "annotated"
    assert ClaimInfo.from_object(claim_object(storage_class=None)).storage_class == ""
