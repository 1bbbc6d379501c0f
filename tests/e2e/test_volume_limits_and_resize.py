"""CSI attach limits and resized pods, side by side with the real kube-scheduler on the sandbox.

Each test creates what it needs in one cluster, then the same pod for promsched and for kube-scheduler
(one scheduler name each, one after the other); both must decide alike, with the same message. The
sandbox's kwok nodes have no kubelet: the test writes the CSINodes and the resized pods' status itself,
as a kubelet would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from promsched.sandbox.control_plane.clusters import Sandbox
from support.clusters import Cluster
from support.differential import (
    CPU,
    HOSTNAME,
    create,
    failed_scheduling,
    pod,
    without_preemption,
)
from support.polling import eventually
from support.volume_manifests import claim_manifest, volume_manifest

DRIVER = "e2e.csi.promsched.io"
SCHEDULERS = ("ours", "kube")


def csi_node(node: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": node, "allocatable": {"count": count}}]},
    }


def claims_phase(sandbox: Sandbox, cluster: Cluster) -> dict[str, str]:
    items = json.loads(sandbox.kubectl("get", "pvc", "-n", cluster.namespace, "-o", "json").stdout)["items"]
    return {item["metadata"]["name"]: item["status"].get("phase", "") for item in items}


def all_bound(*names: str) -> Callable[[dict[str, str | None]], bool]:
    return lambda nodes: all(nodes.get(name) for name in names)


def using(*claims: str) -> list[dict[str, Any]]:
    return [{"name": name, "persistentVolumeClaim": {"claimName": name}} for name in claims]


def test_a_node_at_its_csinode_limit_takes_no_pod_with_a_new_volume(
    sandbox: Sandbox, cluster: Cluster, kube_scheduler: str
) -> None:
    cluster.policy(CPU)
    volumes = [f"{cluster.namespace}-{name}" for name in ("a", "b", "c")]
    schedulers = {"ours": cluster.scheduler_name, "kube": kube_scheduler}
    on_node_1 = {HOSTNAME: "node-1"}
    try:
        create(
            cluster,
            csi_node("node-1", 2),
            *(volume_manifest(volume, csi_driver=DRIVER) for volume in volumes),
            *(
                claim_manifest(cluster.namespace, name, volume=volume)
                for name, volume in zip("abc", volumes, strict=True)
            ),
        )
        eventually(
            lambda: claims_phase(sandbox, cluster),
            lambda phases: phases == dict.fromkeys("abc", "Bound"),
            what="the claims bound to their CSI volumes",
        )
        # node-1 attaches a and b already: its driver's count of 2 is used up.
        create(cluster, pod(cluster, "holder", {"app": "holder"}, nodeName="node-1", volumes=using("a", "b")))
        expected = (
            "0/6 nodes are available: 1 node(s) exceed max volume count, "
            "5 node(s) didn't match Pod's node affinity/selector."
        )
        messages = {}
        for prefix in SCHEDULERS:
            name = f"{prefix}-new"
            create(
                cluster,
                pod(
                    cluster,
                    name,
                    {"app": prefix},
                    schedulers[prefix],
                    volumes=using("c"),
                    nodeSelector=on_node_1,
                ),
            )
            messages[prefix] = eventually(
                lambda name=name: failed_scheduling(cluster, name), bool, what=f"{prefix} FailedScheduling"
            )
        assert without_preemption(messages["kube"]) == expected
        assert without_preemption(messages["ours"]) == expected
        # A volume the node attaches already takes no more of its count: both place the pod there.
        for prefix in SCHEDULERS:
            create(
                cluster,
                pod(
                    cluster,
                    f"{prefix}-shared",
                    {},
                    schedulers[prefix],
                    volumes=using("a"),
                    nodeSelector=on_node_1,
                ),
            )
        placed = eventually(
            cluster.node_of,
            all_bound("ours-shared", "kube-shared"),
            what="the pods sharing an attached volume bound",
        )
        assert placed["ours-shared"] == placed["kube-shared"] == "node-1"
        assert placed["ours-new"] is None
        assert placed["kube-new"] is None
        # The driver may attach one more (a new CSINode): both retry their pod and place it.
        sandbox.kubectl("delete", "csinode", "node-1")
        create(cluster, csi_node("node-1", 3))
        placed = eventually(
            cluster.node_of,
            all_bound("ours-new", "kube-new"),
            what="the pods with a new volume bound once the limit rose",
        )
        assert placed["ours-new"] == placed["kube-new"] == "node-1"
    finally:
        sandbox.kubectl("delete", "namespace", cluster.namespace, "--ignore-not-found", "--timeout=180s")
        sandbox.kubectl("delete", "csinode", "node-1", "--ignore-not-found")
        sandbox.kubectl("delete", "pv", *volumes, "--ignore-not-found", "--wait=false")


def set_resize_status(
    sandbox: Sandbox, cluster: Cluster, name: str, *, allocated: str, actuated: str, infeasible: bool
) -> None:
    """Write what the kubelet reports of a resize: the container's allocated and actuated cpu, and for
    an infeasible one the PodResizePending condition."""
    patch = [
        {"op": "add", "path": "/status/containerStatuses/0/allocatedResources", "value": {"cpu": allocated}},
        {
            "op": "add",
            "path": "/status/containerStatuses/0/resources",
            "value": {"requests": {"cpu": actuated}},
        },
    ]
    if infeasible:
        condition = {
            "type": "PodResizePending",
            "status": "True",
            "reason": "Infeasible",
            "message": "Node didn't have enough capacity: cpu, requested: 3000, capacity: 3900",
        }
        patch.append({"op": "add", "path": "/status/conditions/-", "value": condition})
    sandbox.kubectl(
        "patch",
        "pod",
        name,
        "-n",
        cluster.namespace,
        "--subresource=status",
        "--type=json",
        f"--patch={json.dumps(patch)}",
    )


def running(cluster: Cluster, name: str) -> bool:
    found = [p for p in cluster.pods() if p["metadata"]["name"] == name]
    return bool(found) and bool(found[0]["status"].get("containerStatuses"))


def test_resized_pods_count_as_kube_scheduler_counts_them(
    sandbox: Sandbox, cluster: Cluster, kube_scheduler: str
) -> None:
    cluster.policy(CPU)
    schedulers = {"ours": cluster.scheduler_name, "kube": kube_scheduler}
    # node-2 (3900m): a pod asked down to 1 cpu still runs with 3 until the kubelet actuates it; node-5:
    # a pod asked up to 3 cpu runs with 1, the resize infeasible.
    create(
        cluster,
        pod(cluster, "shrinking", {"app": "resized"}, cpu="1", nodeName="node-2"),
        pod(cluster, "stuck", {"app": "resized"}, cpu="3", nodeName="node-5"),
    )
    for name in ("shrinking", "stuck"):
        eventually(lambda name=name: running(cluster, name), bool, what=f"{name} running")
    set_resize_status(sandbox, cluster, "shrinking", allocated="1", actuated="3", infeasible=False)
    set_resize_status(sandbox, cluster, "stuck", allocated="1", actuated="1", infeasible=True)
    expected = (
        "0/6 nodes are available: 1 Insufficient cpu, 5 node(s) didn't match Pod's node affinity/selector."
    )
    messages = {}
    for prefix in SCHEDULERS:
        # 1500m fits beside the spec's 1 cpu, not beside the 3 it still runs with.
        on_node_2 = {HOSTNAME: "node-2"}
        create(
            cluster,
            pod(
                cluster,
                f"{prefix}-beside",
                {"app": prefix},
                schedulers[prefix],
                "1500m",
                nodeSelector=on_node_2,
            ),
        )
        messages[prefix] = eventually(
            lambda prefix=prefix: failed_scheduling(cluster, f"{prefix}-beside"),
            bool,
            what=f"{prefix} FailedScheduling",
        )
    assert without_preemption(messages["kube"]) == expected
    assert without_preemption(messages["ours"]) == expected
    # Beside the infeasible upsize the node holds 1 cpu, not 3: both pods of 1 cpu fit.
    for prefix in SCHEDULERS:
        on_node_5 = {HOSTNAME: "node-5"}
        create(
            cluster,
            pod(cluster, f"{prefix}-after", {"app": prefix}, schedulers[prefix], "1", nodeSelector=on_node_5),
        )
    placed = eventually(
        cluster.node_of,
        all_bound("ours-after", "kube-after"),
        what="both pods bound beside the infeasible resize",
    )
    assert placed["ours-after"] == placed["kube-after"] == "node-5"
