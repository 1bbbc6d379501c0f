"""What a pod's volumes ask of the scheduler: the claims they use, whether they store on the node, and
the volume sources kube-scheduler checks that promsched does not."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from promsched.scheduling.objects.fields import list_field, object_field

# Inline volumes that kube-scheduler's VolumeRestrictions plugin checks for conflicting mounts on a node;
# promsched does not track those mounts, so it refuses pods that use them.
CONFLICT_CHECKED_VOLUMES: Final = ("gcePersistentDisk", "awsElasticBlockStore", "iscsi", "rbd")


@dataclass(frozen=True, slots=True)
class PodClaim:
    """A PersistentVolumeClaim one of the pod's volumes uses. `path` names the volume's field; an
    ephemeral volume's claim is created for the pod by the ephemeral volume controller, named
    ``<pod>-<volume>``."""

    path: str
    name: str
    ephemeral: bool = False


def pod_claims(spec: Mapping[str, Any], pod_name: str) -> Iterator[PodClaim]:
    for index, volume in enumerate(list_field(spec.get("volumes"), "spec.volumes")):
        path = f"spec.volumes[{index}]"
        if volume.get("persistentVolumeClaim") is not None:
            source = object_field(volume["persistentVolumeClaim"], f"{path}.persistentVolumeClaim")
            yield PodClaim(f"{path}.persistentVolumeClaim", source.get("claimName") or "")
        elif volume.get("ephemeral") is not None:
            yield PodClaim(f"{path}.ephemeral", f"{pod_name}-{volume.get('name') or ''}", ephemeral=True)


def has_local_storage(spec: Mapping[str, Any]) -> bool:
    return any(
        volume.get("emptyDir") is not None or volume.get("hostPath") is not None
        for volume in list_field(spec.get("volumes"), "spec.volumes")
    )


def unsupported_volumes(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields kube-scheduler would honour and promsched cannot yet: resource claims (dynamic
    resource allocation) and inline disks whose conflicting mounts kube checks per node."""
    fields = [
        f"spec.volumes[{index}].{source}"
        for index, volume in enumerate(list_field(spec.get("volumes"), "spec.volumes"))
        for source in CONFLICT_CHECKED_VOLUMES
        if volume.get(source)
    ]
    if spec.get("resourceClaims"):
        fields.append("spec.resourceClaims")
    return tuple(fields)
