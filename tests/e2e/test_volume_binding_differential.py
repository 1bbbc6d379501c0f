"""Claims that bind at their first consumer, side by side with the real kube-scheduler on the sandbox.

Each scheduler gets its own StorageClass and volumes in one cluster, one scheduler after the other; both
must place alike and say the same of the pod left over. The sandbox's kube-controller-manager runs the
StatefulSet and PersistentVolume controllers; no provisioner runs, so the test provisions itself: it
watches for claims given a selected node and creates a volume reachable from that node, pre-bound to
the claim, as an external provisioner does.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from promsched.sandbox.control_plane.clusters import Sandbox
from support.clusters import Cluster
from support.differential import (
    CPU,
    HOSTNAME,
    ZONE,
    create,
    failed_scheduling,
    pod,
    without_preemption,
)
from support.polling import eventually
from support.volume_manifests import NO_PROVISIONER, claim_manifest, volume_manifest, waiting_class_manifest

SELECTED_NODE = "volume.kubernetes.io/selected-node"


def local_volume(name: str, node: str, storage_class: str, **spec: Any) -> dict[str, Any]:
    return volume_manifest(name, storage_class=storage_class, on=node, local_path=f"/mnt/{name}", **spec)


def claim(cluster: Cluster, name: str, storage_class: str, size: str = "1Gi") -> dict[str, Any]:
    # An annotation of its own: without any, kube reads a removed selected node as "annotation reset".
    return claim_manifest(
        cluster.namespace, name, storage_class=storage_class, size=size, annotations={"e2e": "claim"}
    )


def stateful_set(cluster: Cluster, name: str, scheduler: str, storage_class: str) -> dict[str, Any]:
    template = pod(cluster, name, {"app": name}, scheduler)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": cluster.namespace},
        "spec": {
            "replicas": 3,
            "serviceName": name,
            # All at once: kwok's pods never report ready, which OrderedReady would wait for.
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]},
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": storage_class,
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }


def claims(sandbox: Sandbox, cluster: Cluster) -> dict[str, dict[str, Any]]:
    items = json.loads(sandbox.kubectl("get", "pvc", "-n", cluster.namespace, "-o", "json").stdout)["items"]
    return {item["metadata"]["name"]: item for item in items}


def phases(sandbox: Sandbox, cluster: Cluster) -> dict[str, str]:
    return {name: item["status"].get("phase", "") for name, item in claims(sandbox, cluster).items()}


def bound_claims(sandbox: Sandbox, cluster: Cluster, prefix: str) -> int:
    return sum(
        1 for name, phase in phases(sandbox, cluster).items() if name.startswith(prefix) and phase == "Bound"
    )


def test_a_stateful_set_with_local_volumes_on_two_nodes_places_two_replicas_there(
    sandbox: Sandbox, cluster: Cluster, kube_scheduler: str
) -> None:
    cluster.policy(CPU)
    schedulers = {"ours": cluster.scheduler_name, "kube": kube_scheduler}
    # node-0 and node-3 are the busiest: load alone would never choose them.
    volume_nodes = ("node-0", "node-3")
    classes = {prefix: f"{prefix}-local-{cluster.namespace}" for prefix in schedulers}
    volumes = [f"{classes[prefix]}-{node}" for prefix in schedulers for node in volume_nodes]
    messages = {}
    try:
        for prefix, scheduler in schedulers.items():
            create(
                cluster,
                waiting_class_manifest(classes[prefix], NO_PROVISIONER),
                *(local_volume(f"{classes[prefix]}-{node}", node, classes[prefix]) for node in volume_nodes),
            )
            create(cluster, stateful_set(cluster, prefix, scheduler, classes[prefix]))
            placed = eventually(
                lambda prefix=prefix: {
                    name: node for name, node in cluster.node_of().items() if name.startswith(prefix)
                },
                lambda p: len(p) == 3 and sum(1 for node in p.values() if node) == 2,
                what=f"two {prefix} replicas bound",
            )
            assert sorted(node for node in placed.values() if node) == list(volume_nodes), prefix
            # The PersistentVolume controller completes what the scheduler's PreBind started.
            eventually(
                lambda prefix=prefix: bound_claims(sandbox, cluster, f"data-{prefix}-"),
                lambda count: count == 2,
                what=f"the {prefix} replicas' claims bound",
            )
            [pending] = [name for name, node in placed.items() if not node]
            # The StatefulSet controller creates a replica's claim just before the pod, and the claims'
            # watch may deliver it after the pods' watch: either scheduler may first say the claim was
            # not found, then retry once it arrives (a claim added lifts the rejection).
            messages[prefix] = eventually(
                lambda pending=pending: failed_scheduling(cluster, pending),
                lambda message: bool(message) and "not found" not in message,
                what=f"{prefix} FailedScheduling once its claim is known",
            )
        expected = "0/6 nodes are available: 6 node(s) didn't find available persistent volumes to bind."
        assert without_preemption(messages["kube"]) == expected
        assert without_preemption(messages["ours"]) == expected
    finally:
        sandbox.kubectl("delete", "namespace", cluster.namespace, "--ignore-not-found", "--timeout=180s")
        sandbox.kubectl("delete", "pv", *volumes, "--ignore-not-found", "--wait=false")
        sandbox.kubectl("delete", "storageclass", *classes.values(), "--ignore-not-found")


class Provisioner:
    """Provisions the claims of `storage_class` given a selected node, as an external provisioner
    does: a volume of the claim's size reachable from that node, its claimRef naming the claim. With
    `refuse_first`, it first gives up on each claim, as a provisioner that failed: it removes the
    selected node."""

    def __init__(
        self, sandbox: Sandbox, cluster: Cluster, storage_class: str, *, refuse_first: bool = False
    ) -> None:
        self.sandbox, self.cluster, self.storage_class = sandbox, cluster, storage_class
        self.refuse_first = refuse_first
        self.refused: set[str] = set()
        self.created: list[str] = []
        self.selected: dict[str, str] = {}  # claim -> the node it was provisioned for
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="e2e-provisioner", daemon=True)

    def __enter__(self) -> Provisioner:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            for name, item in claims(self.sandbox, self.cluster).items():
                node = (item["metadata"].get("annotations") or {}).get(SELECTED_NODE)
                spec = item["spec"]
                if node is None or spec.get("volumeName") or name in self.selected:
                    continue
                if spec.get("storageClassName") != self.storage_class:
                    continue
                if self.refuse_first and name not in self.refused:
                    self.refused.add(name)
                    annotate = ("annotate", "pvc", name, f"{SELECTED_NODE}-", "-n", self.cluster.namespace)
                    self.sandbox.kubectl(*annotate)
                    continue
                volume = f"pvc-{item['metadata']['uid']}"
                ref = {"namespace": self.cluster.namespace, "name": name, "uid": item["metadata"]["uid"]}
                create(
                    self.cluster,
                    local_volume(
                        volume,
                        node,
                        self.storage_class,
                        capacity={"storage": spec["resources"]["requests"]["storage"]},
                        claimRef=ref,
                    ),
                )
                self.selected[name] = node
                self.created.append(volume)


def test_dynamic_provisioning_follows_allowed_topologies_and_storage_capacity(
    sandbox: Sandbox, cluster: Cluster, kube_scheduler: str
) -> None:
    cluster.policy(CPU)
    schedulers = {"ours": cluster.scheduler_name, "kube": kube_scheduler}
    driver = f"{cluster.namespace}.e2e.promsched.io"
    storage_class = f"dynamic-{cluster.namespace}"
    # Provisioned volumes may go to zone-a (node-0, node-3); the driver has room on node-3 only.
    topologies = [{"matchLabelExpressions": [{"key": ZONE, "values": ["zone-a"]}]}]
    capacity = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": "node-3", "namespace": cluster.namespace},
        "storageClassName": storage_class,
        "nodeTopology": {"matchLabels": {HOSTNAME: "node-3"}},
        "capacity": "5Gi",
    }
    csi_driver = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": driver},
        "spec": {"storageCapacity": True, "attachRequired": False},
    }
    messages = {}
    provisioner = Provisioner(sandbox, cluster, storage_class)
    try:
        create(
            cluster,
            csi_driver,
            waiting_class_manifest(storage_class, driver, allowedTopologies=topologies),
            capacity,
        )
        with provisioner:
            for prefix, scheduler in schedulers.items():
                uses = [{"name": "d", "persistentVolumeClaim": {"claimName": f"{prefix}-data"}}]
                too_big = [{"name": "d", "persistentVolumeClaim": {"claimName": f"{prefix}-huge"}}]
                create(
                    cluster,
                    claim(cluster, f"{prefix}-data", storage_class),
                    claim(cluster, f"{prefix}-huge", storage_class, size="50Gi"),
                    pod(cluster, f"{prefix}-fits", {"app": prefix}, scheduler, volumes=uses),
                    pod(cluster, f"{prefix}-big", {"app": prefix}, scheduler, volumes=too_big),
                )
                placed = eventually(
                    cluster.node_of,
                    lambda p, prefix=prefix: bool(p.get(f"{prefix}-fits")),
                    what=f"{prefix} bound",
                )
                assert placed[f"{prefix}-fits"] == "node-3", prefix
                assert provisioner.selected[f"{prefix}-data"] == "node-3"
                eventually(
                    lambda: phases(sandbox, cluster),
                    lambda p, prefix=prefix: p.get(f"{prefix}-data") == "Bound",
                    what=f"the {prefix} claim bound to its provisioned volume",
                )
                messages[prefix] = eventually(
                    lambda prefix=prefix: failed_scheduling(cluster, f"{prefix}-big"),
                    bool,
                    what=f"{prefix} FailedScheduling",
                )
                assert cluster.node_of()[f"{prefix}-big"] is None
        expected = (
            "0/6 nodes are available: 2 node(s) did not have enough free storage, "
            "4 node(s) didn't find available persistent volumes to bind."
        )
        assert without_preemption(messages["kube"]) == expected
        assert without_preemption(messages["ours"]) == expected
        # Nothing asked for the huge claims: no node was ever selected for them.
        annotations = {
            name: c["metadata"].get("annotations") or {} for name, c in claims(sandbox, cluster).items()
        }
        assert SELECTED_NODE not in annotations["ours-huge"]
        assert SELECTED_NODE not in annotations["kube-huge"]
    finally:
        sandbox.kubectl("delete", "namespace", cluster.namespace, "--ignore-not-found", "--timeout=180s")
        if provisioner.created:
            sandbox.kubectl("delete", "pv", *provisioner.created, "--ignore-not-found", "--wait=false")
        sandbox.kubectl("delete", "storageclass", storage_class, "--ignore-not-found")
        sandbox.kubectl("delete", "csidriver", driver, "--ignore-not-found")


def test_a_pod_whose_bound_local_volume_is_elsewhere_is_told_as_kube_tells_it(
    sandbox: Sandbox, cluster: Cluster, kube_scheduler: str
) -> None:
    cluster.policy(CPU)
    volume = f"bound-{cluster.namespace}"
    bound = {
        **claim(cluster, "data", ""),
        "spec": {**claim(cluster, "data", "")["spec"], "volumeName": volume},
    }
    try:
        create(cluster, local_volume(volume, "node-0", ""), bound)
        eventually(
            lambda: phases(sandbox, cluster), lambda p: p.get("data") == "Bound", what="the claim bound"
        )
        uses = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
        elsewhere = {"nodeSelector": {HOSTNAME: "node-1"}}
        messages = {}
        for prefix, scheduler in (("ours", cluster.scheduler_name), ("kube", kube_scheduler)):
            create(cluster, pod(cluster, prefix, {"app": prefix}, scheduler, volumes=uses, **elsewhere))
            messages[prefix] = eventually(
                lambda prefix=prefix: failed_scheduling(cluster, prefix),
                bool,
                what=f"{prefix} FailedScheduling",
            )
        assert without_preemption(messages["ours"]) == without_preemption(messages["kube"])
    finally:
        sandbox.kubectl("delete", "namespace", cluster.namespace, "--ignore-not-found", "--timeout=180s")
        sandbox.kubectl("delete", "pv", volume, "--ignore-not-found", "--wait=false")


def test_a_provisioner_that_gives_up_sends_the_pod_back_and_it_is_placed_on_the_retry(
    sandbox: Sandbox, cluster: Cluster, kube_scheduler: str
) -> None:
    cluster.policy(CPU)
    provisioner_name = f"{cluster.namespace}.e2e.promsched.io"
    storage_class = f"flaky-{cluster.namespace}"
    topologies = [{"matchLabelExpressions": [{"key": HOSTNAME, "values": ["node-4"]}]}]
    provisioner = Provisioner(sandbox, cluster, storage_class, refuse_first=True)
    messages = {}
    try:
        create(cluster, waiting_class_manifest(storage_class, provisioner_name, allowedTopologies=topologies))
        with provisioner:
            for prefix, scheduler in (("ours", cluster.scheduler_name), ("kube", kube_scheduler)):
                uses = [{"name": "d", "persistentVolumeClaim": {"claimName": f"{prefix}-data"}}]
                create(
                    cluster,
                    claim(cluster, f"{prefix}-data", storage_class),
                    pod(cluster, prefix, {"app": prefix}, scheduler, volumes=uses),
                )
                placed = eventually(
                    cluster.node_of, lambda p, prefix=prefix: bool(p.get(prefix)), what=f"{prefix} bound"
                )
                assert placed[prefix] == "node-4"
                assert f"{prefix}-data" in provisioner.refused
                messages[prefix] = eventually(
                    lambda prefix=prefix: failed_scheduling(cluster, prefix),
                    bool,
                    what=f"{prefix} FailedScheduling",
                )
        expected = (
            'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC "{}-data"'
        )
        assert messages["kube"] == expected.format("kube")
        assert messages["ours"] == expected.format("ours")
    finally:
        sandbox.kubectl("delete", "namespace", cluster.namespace, "--ignore-not-found", "--timeout=180s")
        if provisioner.created:
            sandbox.kubectl("delete", "pv", *provisioner.created, "--ignore-not-found", "--wait=false")
        sandbox.kubectl("delete", "storageclass", storage_class, "--ignore-not-found")
