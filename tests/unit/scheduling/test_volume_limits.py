"""NodeVolumeLimits: the CSI volumes a node can still attach (its CSINode's allocatable counts), and the
cluster changes that give pods it rejected another try; as kube-scheduler 1.37's CSILimits plugin."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.filters.volume_limits import MAX_VOLUME_COUNT, NodeVolumeLimits, VolumeLimitsCheck
from promsched.scheduling.framework import ClusterEvent
from promsched.scheduling.intake import kinds
from promsched.scheduling.objects.csi_nodes import CSINodeInfo, CSIVolume, VolumeAttachmentInfo, csi_volume
from promsched.scheduling.objects.fields import FieldError
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.objects.storage_capacities import CSIDriverInfo
from promsched.scheduling.objects.volumes import ClaimInfo, VolumeInfo
from promsched.scheduling.schedulers import Scheduler
from support.objects import (
    claim_object,
    csi_node_object,
    node,
    node_object,
    pod,
    pod_object,
    storage_class_object,
    volume_attachment_object,
    volume_object,
)
from support.placement import cache_with, decide_evenly
from support.queueing import NoSender, park, retried

EBS = "ebs.csi.aws.com"
NODES = [node("n1"), node("n2")]


def using(*claims: str, name: str = "app", **options: Any) -> PodInfo:
    volumes = [
        {"name": f"v{index}", "persistentVolumeClaim": {"claimName": claim}}
        for index, claim in enumerate(claims)
    ]
    return pod(name, volumes=volumes, **options)


def ebs_claims(*names: str) -> list[dict[str, Any]]:
    return [claim_object(name, f"pv-{name}") for name in names]


def ebs_volumes(*names: str) -> list[dict[str, Any]]:
    return [volume_object(f"pv-{name}", csi=EBS) for name in names]


def cluster(existing: list[PodInfo], names: tuple[str, ...], **limits: int | None) -> ClusterCache:
    cache = cache_with(NODES, existing, claims=ebs_claims(*names), volumes=ebs_volumes(*names))
    cache.upsert_csi_node(CSINodeInfo.from_object(csi_node_object("n1", **limits)))
    return cache


def test_a_node_at_its_csi_limit_fits_no_pod_with_a_new_volume() -> None:
    existing = using("a", "b", name="old", node_name="n1")
    cache = cluster([existing], ("a", "b", "c"), ebs_csi_aws_com=2)
    outcome = decide_evenly(using("c"), cache)
    assert outcome.node == "n2"  # no CSINode: no limit
    assert outcome.filtered == {MAX_VOLUME_COUNT: 1}


def test_a_volume_already_attached_to_the_node_is_counted_once() -> None:
    existing = using("a", "b", name="old", node_name="n1")
    cache = cluster([existing], ("a", "b"), ebs_csi_aws_com=2)
    assert decide_evenly(using("a", "b"), cache).filtered == {}
    # Two pods on the node sharing a volume take one attachment.
    shared = [using("a", name="x", node_name="n1"), using("a", name="y", node_name="n1")]
    cache = cluster(shared, ("a", "b"), ebs_csi_aws_com=2)
    assert decide_evenly(using("b"), cache).filtered == {}


def test_only_the_drivers_with_a_count_are_limited() -> None:
    existing = using("a", "b", name="old", node_name="n1")
    assert (
        decide_evenly(using("c"), cluster([existing], ("a", "b", "c"), ebs_csi_aws_com=None)).filtered == {}
    )
    assert decide_evenly(using("c"), cluster([existing], ("a", "b", "c"), other_example_com=0)).filtered == {}
    nfs = cluster([existing], ("a", "b"), ebs_csi_aws_com=2)
    nfs.upsert_claim(ClaimInfo.from_object(claim_object("nfs", "pv-nfs")))
    nfs.upsert_volume(VolumeInfo.from_object(volume_object("pv-nfs")))
    assert decide_evenly(using("nfs"), nfs).filtered == {}  # a volume with no CSI source counts nowhere


def test_an_unbound_claim_counts_as_a_volume_of_its_class_provisioner() -> None:
    unbound = claim_object("pending", "", bound=False, storage_class="gp3")
    cache = cache_with(
        NODES,
        [using("a", "pending", name="old", node_name="n1")],
        claims=[*ebs_claims("a", "c"), unbound],
        volumes=ebs_volumes("a", "c"),
        storage_classes=[{**storage_class_object("gp3", "WaitForFirstConsumer"), "provisioner": EBS}],
    )
    cache.upsert_csi_node(CSINodeInfo.from_object(csi_node_object("n1", ebs_csi_aws_com=2)))
    assert decide_evenly(using("c"), cache).filtered == {MAX_VOLUME_COUNT: 1}


def test_migrated_in_tree_volumes_and_classes_count_against_their_csi_driver() -> None:
    in_tree = {
        "metadata": {"name": "pv-old"},
        "spec": {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}},
    }
    assert VolumeInfo.from_object(in_tree).csi == CSIVolume(EBS, "vol-1", translated=True)
    unbound = claim_object("legacy", "", bound=False, storage_class="gp2")
    cache = cache_with(
        NODES,
        [using("old", "legacy", name="old", node_name="n1")],
        claims=[claim_object("old", "pv-old"), unbound, *ebs_claims("c")],
        volumes=[in_tree, *ebs_volumes("c")],
        storage_classes=[
            {**storage_class_object("gp2", "WaitForFirstConsumer"), "provisioner": "kubernetes.io/aws-ebs"}
        ],
    )
    cache.upsert_csi_node(CSINodeInfo.from_object(csi_node_object("n1", ebs_csi_aws_com=2)))
    assert decide_evenly(using("c"), cache).filtered == {MAX_VOLUME_COUNT: 1}


@pytest.mark.parametrize(
    ("spec", "labels", "expected"),
    [
        ({"csi": {"driver": "d", "volumeHandle": "h"}}, {}, CSIVolume("d", "h")),
        ({"awsElasticBlockStore": {"volumeID": "vol-2"}}, {}, CSIVolume(EBS, "vol-2", translated=True)),
        (
            {"gcePersistentDisk": {"pdName": "disk"}},
            {"topology.kubernetes.io/zone": "z1"},
            CSIVolume("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/z1/disks/disk", translated=True),
        ),
        (
            {"azureDisk": {"diskURI": "/sub/d"}},
            {},
            CSIVolume("disk.csi.azure.com", "/sub/d", translated=True),
        ),
        ({"nfs": {"server": "s", "path": "/"}}, {}, None),
        ({"csi": "broken"}, {}, None),
    ],
)
def test_the_csi_volume_of_a_persistent_volume(
    spec: dict[str, Any], labels: dict[str, str], expected: CSIVolume | None
) -> None:
    assert csi_volume(spec, labels) == expected


def test_volume_attachments_no_pod_explains_take_their_slot() -> None:
    existing = using("a", name="old", node_name="n1")
    cache = cluster([existing], ("a", "b", "c", "d"), ebs_csi_aws_com=2)
    # a is attached for the pod on the node: counted once; b is still attached, its pod gone.
    for volume in ("a", "b"):
        cache.upsert_attachment(VolumeAttachmentInfo.from_object(attachment(volume)))
    assert decide_evenly(using("c"), cache).filtered == {MAX_VOLUME_COUNT: 1}
    # An attachment of another driver, or of a volume not in the cache, counts nowhere.
    cache.remove_attachment("va-b")
    cache.upsert_attachment(VolumeAttachmentInfo.from_object(attachment("d", attacher="other.example.com")))
    cache.upsert_attachment(VolumeAttachmentInfo.from_object(attachment("gone")))
    assert decide_evenly(using("c"), cache).filtered == {}
    assert set(cache.node_attachments["n1"]) == {"va-a", "va-d", "va-gone"}


def attachment(volume: str, attacher: str = EBS) -> dict[str, Any]:
    return volume_attachment_object(f"va-{volume}", "n1", f"pv-{volume}", attacher)


def test_a_driver_that_must_be_installed_keeps_pods_off_nodes_without_it() -> None:
    cache = cluster([], ("a",), ebs_csi_aws_com=None)
    cache.upsert_csi_driver(CSIDriverInfo.from_object({"metadata": {"name": EBS}, "spec": {}}))
    assert decide_evenly(using("a"), cache).filtered == {}  # not required: n2 without a CSINode fits
    required = {"metadata": {"name": EBS}, "spec": {"preventPodSchedulingIfMissing": True}}
    cache.upsert_csi_driver(CSIDriverInfo.from_object(required))
    outcome = decide_evenly(using("a"), cache)
    assert outcome.node == "n1"
    assert outcome.filtered == {f"{EBS} CSI driver is not installed on the node": 1}


def test_preemption_sees_the_node_without_the_pods_it_would_evict() -> None:
    existing = using("a", "b", name="old", node_name="n1")
    cache = cluster([existing], ("a", "b", "c"), ebs_csi_aws_com=2)
    check = NodeVolumeLimits().prepare(using("c"), cache)
    assert isinstance(check, VolumeLimitsCheck)
    n1 = cache.nodes["n1"]
    status = check.check(n1)
    assert status is not None
    assert status.reason == MAX_VOLUME_COUNT
    assert status.eviction_may_help
    assert status.lifted_by == (
        ClusterEvent.CSI_NODE_CHANGED
        | ClusterEvent.ASSIGNED_POD_DELETED
        | ClusterEvent.CLAIM_CHANGED
        | ClusterEvent.VOLUME_DETACHED
    )
    check.remove_pod(existing, n1)
    assert check.check(n1) is None
    check.add_pod(existing, n1)
    assert check.check(n1) == status


def test_a_pod_without_csi_volumes_is_not_checked() -> None:
    cache = cluster([], ("a",), ebs_csi_aws_com=0)
    assert NodeVolumeLimits().prepare(pod("plain"), cache) is None
    assert NodeVolumeLimits().prepare(using("a"), cache_with(NODES, claims=ebs_claims("a"))) is None


def test_csinode_parsing() -> None:
    info = CSINodeInfo.from_object(csi_node_object("n1", ebs_csi_aws_com=25, other_example_com=None))
    assert dict(info.limits) == {EBS: 25}
    assert info.drivers == {EBS, "other.example.com"}
    with pytest.raises(FieldError, match=r"spec\.drivers\[0\]\.allocatable\.count"):
        CSINodeInfo.from_object(
            {"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": EBS, "allocatable": {"count": "x"}}]}}
        )


def test_a_csinode_added_or_allowing_more_retries_pods_with_claims() -> None:
    scheduler = Scheduler(NoSender())
    park(scheduler, using("a"), pod("plain"))
    scheduler.intake.on_event(
        kinds.CSI_NODES,
        "ADDED",
        csi_node_object("n1", ebs_csi_aws_com=2) | {"metadata": {"name": "n1", "resourceVersion": "1"}},
    )
    assert retried(scheduler) == {"app"}
    park(scheduler, using("a"))
    lowered = csi_node_object("n1", ebs_csi_aws_com=1) | {"metadata": {"name": "n1", "resourceVersion": "2"}}
    scheduler.intake.on_event(kinds.CSI_NODES, "MODIFIED", lowered)
    assert retried(scheduler) == set()
    raised = csi_node_object("n1", ebs_csi_aws_com=3) | {"metadata": {"name": "n1", "resourceVersion": "3"}}
    scheduler.intake.on_event(kinds.CSI_NODES, "MODIFIED", raised)
    assert retried(scheduler) == {"app"}
    scheduler.intake.on_event(
        kinds.CSI_NODES, "DELETED", raised | {"metadata": {"name": "n1", "resourceVersion": "4"}}
    )
    assert "n1" not in scheduler.cache.csi_nodes


def test_a_volume_detached_retries_pods_with_claims() -> None:
    scheduler = Scheduler(NoSender())
    scheduler.intake.on_event(kinds.VOLUME_ATTACHMENTS, "ADDED", attachment("a"))
    park(scheduler, using("a"), pod("plain"))
    assert retried(scheduler) == set()
    scheduler.intake.on_event(kinds.VOLUME_ATTACHMENTS, "DELETED", attachment("a"))
    assert retried(scheduler) == {"app"}
    assert scheduler.cache.node_attachments == {}


def test_a_resize_that_lowers_a_bound_pods_requests_retries_parked_pods_and_frees_its_node() -> None:
    scheduler = Scheduler(NoSender())
    scheduler.intake.on_event(kinds.NODES, "ADDED", node_object("n1"))
    running = pod_object("big", node_name="n1", cpu="3")
    scheduler.intake.on_event(kinds.PODS, "ADDED", running)
    park(scheduler, pod("waiting", cpu="2"))
    resized = {**running, "metadata": {**running["metadata"], "resourceVersion": "2"}}
    resized["status"] = {
        **running["status"],
        "containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}],
    }
    scheduler.intake.on_event(kinds.PODS, "MODIFIED", resized)  # a scale-up actuated first: nothing freed
    assert retried(scheduler) == set()
    assert scheduler.cache.usage_of("n1").requested.milli_cpu == 4000
    shrunk = {**resized, "metadata": {**running["metadata"], "resourceVersion": "3"}}
    shrunk["spec"] = {
        **running["spec"],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
    }
    shrunk["status"] = {
        **running["status"],
        "containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
    }
    scheduler.intake.on_event(kinds.PODS, "MODIFIED", shrunk)
    assert retried(scheduler) == {"waiting"}
    assert scheduler.cache.usage_of("n1").requested.milli_cpu == 1000
