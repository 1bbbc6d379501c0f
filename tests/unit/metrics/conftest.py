"""Fixtures for the metrics tests: a policy builder (the fake Prometheus is in tests/unit/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from promsched.api.policies import SchedulingPolicySpec
from support.policies import policy_spec


@pytest.fixture
def make_spec() -> Callable[..., SchedulingPolicySpec]:
    return policy_spec
