"""The Kopf wiring's own parts that run without a cluster."""

from __future__ import annotations

import kopf

from promsched.operating.wiring import NoDiffBase


def test_no_diff_base_keeps_no_state_of_pods() -> None:
    storage = NoDiffBase()
    body = kopf.Body({"metadata": {"name": "web", "uid": "u"}, "spec": {"containers": [{"name": "c"}]}})
    assert storage.fetch(body=body) is None
    essence = storage.build(body=body)
    assert essence == {}
    essence["spec"] = {}  # what Kopf may do with one essence leaves the next one alone
    assert storage.build(body=body) == {}
