"""Fixtures shared by every tier. The integration tiers share one sandbox per test run, or per worker
when pytest-xdist runs several (`make test` runs two: each worker takes whole files, so a module's
operator and its tests stay on one sandbox).

Set PROMSCHED_SANDBOX_DIR to a folder holding a running sandbox to reuse it across runs (it is then
left running); otherwise the run starts its own in a temporary folder and stops it at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from promsched.api.crds import render_crd_yaml
from promsched.sandbox import launching
from promsched.sandbox.control_plane.clusters import Sandbox
from support.clusters import Cluster, Operator
from support.polling import eventually

FIXTURES = Path(__file__).parent / "fixtures"
SANDBOX_NODES = 6
# Tiers run cheapest first; the fault tier last, since it stops and restarts shared components.
TIER_ORDER = ("unit", "integration", "e2e", "faults", "load")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def tier(item: pytest.Item) -> int:
        parts = item.path.relative_to(Path(__file__).parent).parts
        return TIER_ORDER.index(parts[0]) if parts[0] in TIER_ORDER else len(TIER_ORDER)

    items.sort(key=tier)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    reuse = os.environ.get("PROMSCHED_SANDBOX_DIR")
    if reuse and int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        pytest.fail(
            "PROMSCHED_SANDBOX_DIR names one sandbox, which workers would share (each module starts an "
            "operator there): run on one worker, `make test TEST_WORKERS=0` or `pytest -n 0`",
            pytrace=False,
        )
    if reuse:
        yield Sandbox.load(Path(reuse))
        return
    directory = tmp_path_factory.mktemp("sandbox")
    started = launching.up(directory, nodes=SANDBOX_NODES, profiles_file=FIXTURES / "profiles.yaml")
    try:
        yield started
    finally:
        launching.down(directory)


# Per module: an operator left running would also write the status of other tiers' policies.
@pytest.fixture(scope="module")
def operator(sandbox: Sandbox) -> Iterator[Operator]:
    sandbox.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=render_crd_yaml())
    sandbox.wait_established("schedulingpolicies.promsched.io")
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
