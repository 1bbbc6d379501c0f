import pytest

from promsched.sandbox.node_metrics.usages import (
    ANNOTATION,
    PodUsage,
    UsageError,
    container_shares,
    default_usage,
    parse_usage,
    usage_of,
)
from support.objects import pod_object


def test_every_key_is_read_in_its_unit() -> None:
    assert parse_usage("cpu=1500m,memory=2Gi,diskBusy=12.5,network=2M") == PodUsage(
        milli_cpu=1500, memory=2 * 1024**3, disk_busy=12.5, network=2_000_000
    )


@pytest.mark.parametrize(
    ("text", "usage"),
    [
        ("cpu=1.5", PodUsage(milli_cpu=1500)),
        ("cpu=2", PodUsage(milli_cpu=2000)),
        ("cpu=250m", PodUsage(milli_cpu=250)),
        ("memory=512Mi", PodUsage(memory=512 * 1024**2)),
        ("memory=1G", PodUsage(memory=1_000_000_000)),
        ("memory=1048576", PodUsage(memory=1024**2)),
        ("network=1.5e6", PodUsage(network=1_500_000)),
        ("network=64Ki", PodUsage(network=65_536)),
        ("diskBusy=100", PodUsage(disk_busy=100.0)),
        (" cpu = 1 , memory=1Ki ", PodUsage(milli_cpu=1000, memory=1024)),
    ],
)
def test_quantities_take_kubernetes_suffixes(text: str, usage: PodUsage) -> None:
    assert parse_usage(text) == usage


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cpu=lots", "cpu='lots' is not a Kubernetes quantity; write cores or millicores, e.g. cpu=1.5"),
        ("memory=2GB", "memory='2GB' is not a Kubernetes quantity; write bytes, e.g. memory=2Gi"),
        ("cpu=-1", "cpu='-1' is negative"),
        ("network=fast", "network='fast' is not a Kubernetes quantity; write bytes per second"),
        ("diskBusy=high", "diskBusy='high' is not a number; write a percent of the node disk's I/O time"),
        ("diskBusy=150", "diskBusy='150' is not between 0 and 100"),
        ("gpu=1", "unknown key 'gpu'; use cpu, memory, diskBusy or network"),
        ("cpu", "'cpu' is not key=value"),
        ("cpu=1,,memory=1Gi", "'' is not key=value"),
        ("cpu=", "'cpu=' is not key=value"),
        ("cpu=1,cpu=2", "cpu is given twice; give each key once"),
        ("", "empty; write key=value pairs"),
    ],
)
def test_a_bad_annotation_names_the_key_and_the_fix(text: str, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_usage(text)
    assert str(raised.value).startswith(f"{ANNOTATION}: ")
    assert message in str(raised.value)


def test_without_the_annotation_a_pod_uses_a_share_of_its_requests() -> None:
    pod = pod_object(
        "p",
        node_name="n1",
        containers=[
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        ],
    )
    # 50% of 1500m and 80% of 2Gi, summed over the containers as kube-scheduler sums requests.
    assert usage_of(pod) == PodUsage(milli_cpu=750, memory=round(0.8 * 2 * 1024**3))
    assert usage_of(pod_object("nothing", containers=[{"name": "c"}])) == PodUsage()


def test_keys_the_annotation_leaves_out_keep_the_default_share() -> None:
    pod = pod_object("p", annotations={ANNOTATION: "cpu=3"}, cpu="1")
    assert usage_of(pod) == PodUsage(milli_cpu=3000, memory=round(0.8 * 64 * 1024**2))
    assert default_usage(pod["spec"]) == PodUsage(milli_cpu=500, memory=round(0.8 * 64 * 1024**2))


def test_a_bad_annotation_on_a_pod_raises_for_the_caller_to_report() -> None:
    with pytest.raises(UsageError, match="unknown key 'cores'"):
        usage_of(pod_object("p", annotations={ANNOTATION: "cores=2"}))


def test_containers_share_the_pod_usage_by_request_or_evenly() -> None:
    spec = {
        "containers": [
            {"name": "app", "resources": {"requests": {"cpu": "300m"}}},
            {"name": "log", "resources": {"requests": {"cpu": "100m"}}},
        ],
        "initContainers": [
            {"name": "setup"},
            {"name": "proxy", "restartPolicy": "Always"},
        ],
    }
    shares = {share.name: (share.cpu, share.memory) for share in container_shares(spec)}
    # The init container that runs to completion has no series; the sidecar runs with the app.
    assert shares == {"app": (0.75, 1 / 3), "log": (0.25, 1 / 3), "proxy": (0.0, 1 / 3)}
