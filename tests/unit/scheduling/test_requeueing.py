"""Which cluster changes give parked (unschedulable) pods another try, as kube's queueing hints do."""

from __future__ import annotations

import pytest

from promsched.scheduling.intake.kinds import CLAIMS, NAMESPACES, PODS, STORAGE_CLASSES, VOLUMES
from promsched.scheduling.objects.pods import PodInfo
from promsched.scheduling.schedulers import Scheduler
from support.objects import ZONE, claim_object, pod, pod_object
from support.placement import affinity, anti_affinity, required_term
from support.queueing import NoSender, park, retried

DB = {"app": "db"}


@pytest.fixture
def scheduler() -> Scheduler:
    return Scheduler(NoSender())


def using(claim: str, name: str) -> PodInfo:
    return pod(name, volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": claim}}])


def test_a_claim_that_changes_retries_the_pods_that_use_it(scheduler: Scheduler) -> None:
    park(scheduler, using("data", "app"), using("logs", "other"), pod("plain"))
    scheduler.intake.on_event(CLAIMS, "ADDED", claim_object("data", namespace="elsewhere"))
    assert retried(scheduler) == set()
    scheduler.intake.on_event(CLAIMS, "ADDED", claim_object("data"))
    assert retried(scheduler) == {"app"}


def test_volumes_and_storage_classes_retry_pods_with_claims(scheduler: Scheduler) -> None:
    park(scheduler, using("data", "app"), pod("plain"))
    scheduler.intake.on_event(VOLUMES, "ADDED", {"metadata": {"name": "pv"}, "spec": {}})
    assert retried(scheduler) == {"app"}
    park(scheduler, using("data", "app"))
    scheduler.intake.on_event(
        VOLUMES, "MODIFIED", {"metadata": {"name": "pv", "resourceVersion": "2"}, "spec": {}}
    )
    assert retried(scheduler) == set()  # nothing that matters changed
    scheduler.intake.on_event(
        STORAGE_CLASSES, "ADDED", {"metadata": {"name": "local"}, "volumeBindingMode": "Immediate"}
    )
    assert retried(scheduler) == {"app"}


def test_namespace_relabelling_retries_pods_with_inter_pod_rules(scheduler: Scheduler) -> None:
    near_db = affinity(required_term(DB, ZONE, namespaceSelector={"matchLabels": {"team": "db"}}))
    park(scheduler, pod("web", affinity=near_db), pod("plain"))
    scheduler.intake.on_event(NAMESPACES, "ADDED", {"metadata": {"name": "data"}})
    assert retried(scheduler) == set()  # a new namespace holds no pods to match
    scheduler.intake.on_event(
        NAMESPACES, "MODIFIED", {"metadata": {"name": "data", "labels": {"team": "db"}}}
    )
    assert retried(scheduler) == {"web"}


def test_a_pod_placed_retries_the_pods_it_may_attract_or_balance(scheduler: Scheduler) -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": DB},
        }
    ]
    park(
        scheduler,
        pod("near-db", affinity=affinity(required_term(DB, ZONE))),
        pod("spread-db", labels=DB, topologySpreadConstraints=spread),
        pod("spread-elsewhere", "other", labels=DB, topologySpreadConstraints=spread),
        pod("apart", affinity=anti_affinity(required_term(DB))),
        pod("plain"),
    )
    scheduler.intake.on_event(PODS, "ADDED", pod_object("db-0", labels=DB, node_name="n1"))
    assert retried(scheduler) == {"near-db", "spread-db"}


def test_a_pod_relabelled_on_its_node_retries_pods_with_inter_pod_rules(scheduler: Scheduler) -> None:
    scheduler.intake.on_event(PODS, "ADDED", pod_object("db-0", labels={"app": "old"}, node_name="n1"))
    park(scheduler, pod("apart", affinity=anti_affinity(required_term(DB))), pod("plain"))
    scheduler.intake.on_event(PODS, "MODIFIED", pod_object("db-0", labels=DB, node_name="n1"))
    assert retried(scheduler) == {"apart"}
    park(scheduler, pod("apart", affinity=anti_affinity(required_term(DB))))
    scheduler.intake.on_event(PODS, "MODIFIED", pod_object("db-0", labels=DB, node_name="n1"))
    assert retried(scheduler) == set()
