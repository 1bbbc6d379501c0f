"""The table of the kinds the scheduler follows (intake/kinds.py): where each is listed, how its objects
are told apart, and the places that name them all."""

from __future__ import annotations

import re
from pathlib import Path

from promsched.scheduling.intake.kinds import NAMESPACES, NODES, PODS, VOLUME_ATTACHMENTS, WATCHED

OPERATIONS = Path(__file__).parents[3] / "docs" / "operations.md"


def test_a_kind_is_listed_at_its_groups_path() -> None:
    assert NODES.path == "/api/v1/nodes"
    assert VOLUME_ATTACHMENTS.path == "/apis/storage.k8s.io/v1/volumeattachments"


def test_pods_are_told_apart_by_uid_and_the_rest_by_namespace_and_name() -> None:
    metadata = {"namespace": "shop", "name": "web", "uid": "u1"}
    assert PODS.key(metadata) == "u1"
    assert PODS.key({"namespace": "shop", "name": "web"}) == "shop/web"  # a uid-less object, as a list's
    assert NAMESPACES.key({"name": "shop", "uid": "u2"}) == "shop"
    assert NODES.key(metadata) == "shop/web"


def test_each_kind_appears_once() -> None:
    assert len({kind.plural for kind in WATCHED}) == len(WATCHED)


def test_the_drift_metric_documents_every_kind_as_its_label() -> None:
    (row,) = [line for line in OPERATIONS.read_text().splitlines() if "promsched_cache_drift_total" in line]
    labels = re.search(r"`kind` \(([^)]*)\)", row)
    assert labels is not None
    assert set(labels.group(1).split(", ")) == {kind.plural for kind in WATCHED}
