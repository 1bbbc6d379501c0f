"""The e2e tier: the promsched operator running against the sandbox, driven through kubectl."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from promsched.api.crds import render_crd_yaml
from promsched.sandbox.clusters import Sandbox
from support.clusters import Cluster, Operator
from support.polling import eventually


# Per module: an operator left running would also write the status of other tiers' policies.
@pytest.fixture(scope="module")
def operator(sandbox: Sandbox) -> Iterator[Operator]:
    sandbox.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=render_crd_yaml())
    sandbox.kubectl(
        "wait", "--for=condition=Established", "crd/schedulingpolicies.promsched.io", "--timeout=60s"
    )
    running = Operator(sandbox).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def cluster(sandbox: Sandbox, operator: Operator) -> Iterator[Cluster]:
    helper = Cluster(sandbox)
    sandbox.kubectl("create", "namespace", helper.namespace)
    eventually(
        lambda: (
            sandbox.kubectl(
                "get", "serviceaccount", "default", "-n", helper.namespace, check=False
            ).returncode
        ),
        lambda code: code == 0,
        what="the namespace's default ServiceAccount",
    )
    try:
        yield helper
    finally:
        helper.cleanup()
