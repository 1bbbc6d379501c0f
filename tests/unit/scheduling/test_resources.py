"""Quantities as apimachinery parses them, Resources arithmetic, and pod requests as kube-scheduler counts."""

from __future__ import annotations

from typing import Any

import pytest

from promsched.scheduling.objects.fields import FieldError
from promsched.scheduling.objects.pod_requests import pod_requests
from promsched.scheduling.objects.resources import (
    INT64_MAX,
    ZERO_RESOURCES,
    QuantityError,
    Resources,
    parse_quantity,
    resources_from_list,
)
from support.objects import GIB


@pytest.mark.parametrize(
    ("text", "milli", "expected"),
    [
        ("100m", True, 100),
        ("1", True, 1000),
        ("1.5", True, 1500),
        ("0.1m", True, 1),  # below a millicore: rounds up
        ("1n", True, 1),
        ("250u", True, 1),
        ("12e-2", True, 120),
        ("1e-1000", True, 1),  # tiny but not zero
        (".5", True, 500),
        ("-1", True, -1000),
        ("100m", False, 1),  # a tenth of a byte is a byte
        ("1.5", False, 2),
        ("-0.5", False, -1),  # away from zero, as Quantity rounds
        ("+1", False, 1),
        ("1.", False, 1),
        ("1e3", False, 1000),
        ("1E3", False, 1000),
        ("1e+3", False, 1000),
        ("5E", False, 5 * 10**18),  # E alone is exa, not an exponent
        ("128974848", False, 128974848),
        ("129M", False, 129_000_000),
        ("123Mi", False, 128974848),
        ("1k", False, 1000),
        ("0.5Ki", False, 512),
        ("1Gi", False, GIB),
        ("1.5Gi", False, 1536 * 1024**2),
        ("2Ti", False, 2 * 1024**4),
        ("1P", False, 10**15),
        ("0", False, 0),
        ("0.000Ki", False, 0),
        ("1e100", False, INT64_MAX),  # capped at int64, like Quantity
        ("10Ei", True, INT64_MAX),
        ("1e999999999999", False, INT64_MAX),  # and cheap to compute
        (" 2Gi ", False, 2 * GIB),  # the API's JSON decoder trims spaces
        (2, False, 2),
        (0.25, True, 250),
    ],
)
def test_parse_quantity(text: object, milli: bool, expected: int) -> None:
    assert parse_quantity(text, "spec.x", milli=milli) == expected


@pytest.mark.parametrize(
    "text",
    ["", "   ", "1x", "1K", "1ki", "1mi", "1.2.3", "1e", "1e+", "1ee3", "e3x", "1 Gi", "--1", "1Gi2", "abc"],
)
def test_invalid_quantity_names_field_and_value(text: str) -> None:
    with pytest.raises(QuantityError) as raised:
        parse_quantity(text, "spec.containers[0].resources.requests.cpu")
    assert "spec.containers[0].resources.requests.cpu" in str(raised.value)
    assert repr(text) in str(raised.value)


@pytest.mark.parametrize("value", [None, True, ["1"], {"cpu": "1"}])
def test_non_quantity_values(value: object) -> None:
    with pytest.raises(QuantityError, match=r"status\.allocatable\.memory"):
        parse_quantity(value, "status.allocatable.memory")


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, FieldError)
    assert issubclass(FieldError, ValueError)


def test_resources_arithmetic() -> None:
    one = Resources(1000, GIB, 10, {"nvidia.com/gpu": 1})
    two = Resources(500, GIB, 0, {"example.com/foo": 3})
    assert one + two == Resources(1500, 2 * GIB, 10, {"nvidia.com/gpu": 1, "example.com/foo": 3})
    assert (one + two) - two == one
    assert one - one == ZERO_RESOURCES
    assert (one - one).is_zero
    assert one.max_per_resource(two) == Resources(1000, GIB, 10, {"nvidia.com/gpu": 1, "example.com/foo": 3})


def test_scalars_are_sorted_and_without_zeros() -> None:
    resources = Resources(scalars={"b.io/x": 1, "a.io/x": 2, "c.io/x": 0})
    assert list(resources.scalars.items()) == [("a.io/x", 2), ("b.io/x", 1)]
    assert Resources(scalars={"a.io/x": 0}) == ZERO_RESOURCES


NODE = Resources(4000, 8 * GIB, 100 * GIB, {"nvidia.com/gpu": 2})


@pytest.mark.parametrize(
    ("request_", "used", "short"),
    [
        (Resources(4000, 8 * GIB, 100 * GIB, {"nvidia.com/gpu": 2}), ZERO_RESOURCES, []),  # exactly fits
        (Resources(4001), ZERO_RESOURCES, ["cpu"]),
        (Resources(1000), Resources(3500), ["cpu"]),
        (Resources(memory=1), Resources(memory=8 * GIB), ["memory"]),
        (Resources(ephemeral_storage=GIB), Resources(ephemeral_storage=100 * GIB), ["ephemeral-storage"]),
        (
            Resources(scalars={"nvidia.com/gpu": 1}),
            Resources(scalars={"nvidia.com/gpu": 2}),
            ["nvidia.com/gpu"],
        ),
        (Resources(scalars={"example.com/foo": 1}), ZERO_RESOURCES, ["example.com/foo"]),  # node has none
        (
            Resources(5000, 9 * GIB, 0, {"z.io/a": 1, "example.com/foo": 1}),
            ZERO_RESOURCES,
            ["cpu", "memory", "example.com/foo", "z.io/a"],
        ),
        (ZERO_RESOURCES, Resources(9000, 9 * GIB), []),  # nothing requested fits an overcommitted node
    ],
)
def test_insufficient(request_: Resources, used: Resources, short: list[str]) -> None:
    assert request_.insufficient(used, NODE) == short


def container(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> Any:
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def test_containers_add_up() -> None:
    spec = {"containers": [container({"cpu": "100m", "memory": "1Gi"}), container({"cpu": "1"})]}
    assert pod_requests(spec) == Resources(1100, GIB)


def test_limits_stand_in_for_missing_requests_only() -> None:
    spec = {
        "containers": [
            container(limits={"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}),
            container(requests={"cpu": "500m"}, limits={"cpu": "4", "memory": "2Gi"}),
        ]
    }
    assert pod_requests(spec) == Resources(2500, 3 * GIB, 0, {"nvidia.com/gpu": 1})


def test_init_containers_take_the_larger_of_init_and_app() -> None:
    spec = {
        "initContainers": [container({"cpu": "2", "memory": "100Mi"}), container({"cpu": "500m"})],
        "containers": [container({"cpu": "1", "memory": "1Gi"})],
    }
    assert pod_requests(spec) == Resources(2000, GIB)


def test_sidecars_add_to_the_app_and_to_later_init_containers() -> None:
    spec = {
        "initContainers": [
            container({"cpu": "1"}),  # runs before the sidecar: alone
            container({"cpu": "500m", "memory": "1Gi"}, restartPolicy="Always"),
            container({"cpu": "2"}),  # runs beside the sidecar: 2.5
        ],
        "containers": [container({"cpu": "1", "memory": "1Gi"})],
    }
    assert pod_requests(spec) == Resources(2500, 2 * GIB)


def test_sidecar_alone_counts_with_the_app() -> None:
    spec = {
        "initContainers": [container({"cpu": "3"}, restartPolicy="Always")],
        "containers": [container({"cpu": "1"})],
    }
    assert pod_requests(spec) == Resources(4000)


def test_overhead_is_added_after_init_containers() -> None:
    spec = {
        "initContainers": [container({"cpu": "2"})],
        "containers": [container({"cpu": "1"})],
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    assert pod_requests(spec) == Resources(2250, 120 * 1024**2)


def test_pod_level_requests_replace_cpu_memory_and_hugepages() -> None:
    spec = {
        "resources": {"requests": {"cpu": "3", "hugepages-2Mi": "4Mi", "nvidia.com/gpu": "7"}},
        "containers": [
            container({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1", "hugepages-2Mi": "2Mi"})
        ],
    }
    assert pod_requests(spec) == Resources(3000, GIB, 0, {"nvidia.com/gpu": 1, "hugepages-2Mi": 4 * 1024**2})


def test_uncounted_names_are_left_out() -> None:
    spec = {
        "containers": [container({"cpu": "1", "pods": "1", "storage": "1Gi", "requests.example.com/x": "1"})]
    }
    assert pod_requests(spec) == Resources(1000)


def test_resources_from_list_counts_scalars() -> None:
    allocatable = {
        "cpu": "3920m",
        "memory": "16Gi",
        "ephemeral-storage": "100Gi",
        "pods": "110",
        "hugepages-1Gi": "0",
        "nvidia.com/gpu": "8",
        "attachable-volumes-aws-ebs": "25",
    }
    assert resources_from_list(allocatable, "status.allocatable") == Resources(
        3920, 16 * GIB, 100 * GIB, {"nvidia.com/gpu": 8, "attachable-volumes-aws-ebs": 25}
    )


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"containers": [container({"cpu": "lots"})]}, "spec.containers[0].resources.requests.cpu"),
        (
            {"initContainers": [container(limits={"memory": "1Q"})]},
            "spec.initContainers[0].resources.limits.memory",
        ),
        ({"overhead": {"cpu": "x"}}, "spec.overhead.cpu"),
        ({"containers": "nginx"}, "spec.containers"),
        ({"containers": [{"resources": ["cpu"]}]}, "spec.containers[0].resources"),
    ],
)
def test_malformed_requests_name_the_field(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(FieldError) as raised:
        pod_requests(spec)
    assert str(raised.value).startswith(f"{path}:")


def test_a_repeated_quantity_reads_the_same_and_a_malformed_one_names_each_field_it_is_in() -> None:
    for _ in range(2):
        assert parse_quantity("1500m", "a", milli=True) == 1500
        assert parse_quantity("1500m", "b") == 2  # whole units: rounded up
        for path in ("spec.a", "spec.b"):
            with pytest.raises(QuantityError, match=path):
                parse_quantity("12Q", path)


def test_adding_or_taking_nothing_leaves_the_amounts_as_they_are() -> None:
    amounts = Resources(100, 64, 0, {"example.com/gpu": 1})
    assert amounts + ZERO_RESOURCES == amounts == ZERO_RESOURCES + amounts
    assert amounts - ZERO_RESOURCES == amounts
    assert ZERO_RESOURCES - amounts == Resources(-100, -64, 0, {"example.com/gpu": -1})
