"""The kinds the scheduler follows, in one table: the operator watches each (`operating.wiring`), the
intake lists each and applies each event (`following`), and the chart grants list and watch on each
(a unit test of the chart checks it against `WATCHED`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from promsched.scheduling.intake.bound_pods import UNFINISHED_PODS


# Compared and hashed by identity: the table's are the only ones, and an event's lookup stays cheap.
@dataclass(frozen=True, eq=False)
class Kind:
    """One followed kind: its API group, version and plural, and how its objects are listed and keyed."""

    group: str  # "": the core API
    version: str
    plural: str  # also the drift metric's `kind` label
    by_uid: bool = False  # pods: one recreated under the same name is another pod
    field_selector: str = ""  # the objects of the kind that are listed; "": all

    @property
    def path(self) -> str:
        """The collection's path, every namespace's."""
        prefix = "/api" if not self.group else f"/apis/{self.group}"
        return f"{prefix}/{self.version}/{self.plural}"

    def key(self, metadata: Mapping[str, Any]) -> str:
        """What identifies an object of the kind: its UID (`by_uid`), else its namespace and name."""
        if self.by_uid and metadata.get("uid"):
            return str(metadata["uid"])
        name = str(metadata.get("name", ""))
        namespace = metadata.get("namespace")
        return f"{namespace}/{name}" if namespace else name


NODES: Final = Kind("", "v1", "nodes")
# What inter-pod rules (namespace selectors) and the volume filters read besides pods and nodes.
NAMESPACES: Final = Kind("", "v1", "namespaces")
VOLUMES: Final = Kind("", "v1", "persistentvolumes")
CLAIMS: Final = Kind("", "v1", "persistentvolumeclaims")
STORAGE_CLASSES: Final = Kind("storage.k8s.io", "v1", "storageclasses")
CSI_NODES: Final = Kind("storage.k8s.io", "v1", "csinodes")
VOLUME_ATTACHMENTS: Final = Kind("storage.k8s.io", "v1", "volumeattachments")
# What preemption weighs victims by.
DISRUPTION_BUDGETS: Final = Kind("policy", "v1", "poddisruptionbudgets")
# What provisioning for a WaitForFirstConsumer claim is limited by.
CSI_DRIVERS: Final = Kind("storage.k8s.io", "v1", "csidrivers")
STORAGE_CAPACITIES: Final = Kind("storage.k8s.io", "v1", "csistoragecapacities")
PODS: Final = Kind("", "v1", "pods", by_uid=True, field_selector=UNFINISHED_PODS)

# In the order of the intake's first lists (pods last).
WATCHED: Final = (
    NODES,
    NAMESPACES,
    VOLUMES,
    CLAIMS,
    STORAGE_CLASSES,
    CSI_NODES,
    VOLUME_ATTACHMENTS,
    DISRUPTION_BUDGETS,
    CSI_DRIVERS,
    STORAGE_CAPACITIES,
    PODS,
)
