import pytest

from promsched.sandbox.node_metrics.counters import (
    CPUS,
    MEMORY_TOTAL_BYTES,
    NETWORK_CAPACITY_BYTES,
    NodeCounters,
    container_counters,
    container_samples,
    node_samples,
)
from promsched.sandbox.node_metrics.profiles import LoadProfile
from promsched.sandbox.node_metrics.usages import ContainerShare, PodUsage

ONE = [ContainerShare("c", 1.0, 1.0)]


def busy_share(node: NodeCounters, since: tuple[float, float], until: tuple[float, float]) -> float:
    """The node's CPU busy share between two (time, idle seconds) readings, as rate() computes it."""
    return 1.0 - (until[1] - since[1]) / (until[0] - since[0])


def placed(node: NodeCounters, uid: str, usage: PodUsage, now: float, name: str = "p") -> None:
    node.place(uid, usage, container_counters("ns", name, "n1", usage, ONE), now)


def test_a_pod_adds_its_usage_from_when_it_runs_and_counters_never_jump() -> None:
    node = NodeCounters(LoadProfile(cpu=25, memory=50, disk_busy=10, network=1000), updated_at=0.0)
    node.advance(10.0)
    before = (10.0, node.idle)
    placed(node, "a", PodUsage(milli_cpu=1000, memory=1024**3, disk_busy=5, network=3000), now=10.0)
    # Placing a pod changes no counter at that instant: rate() takes the usage in over its window.
    assert node.idle == before[1]
    node.advance(20.0)
    after = (20.0, node.idle)
    # One core of four more busy: 25% + 25%.
    assert busy_share(node, before, after) == pytest.approx(0.5)
    assert node.io_time == pytest.approx(1.0 + 1.5)
    assert node.eth0_rx + node.eth0_tx == pytest.approx(10_000 + 40_000)
    assert node.memory_available == MEMORY_TOTAL_BYTES / 2 - 1024**3
    node.remove("a", now=20.0)
    assert node.idle == after[1]
    node.advance(30.0)
    assert busy_share(node, after, (30.0, node.idle)) == pytest.approx(0.25)
    assert node.memory_available == MEMORY_TOTAL_BYTES / 2


def test_two_pods_add_up() -> None:
    node = NodeCounters(LoadProfile(cpu=10, memory=10), updated_at=0.0)
    placed(node, "a", PodUsage(milli_cpu=400, memory=2 * 1024**3), 0.0, "a")
    placed(node, "b", PodUsage(milli_cpu=800, memory=1024**3), 0.0, "b")
    node.advance(100.0)
    assert busy_share(node, (0.0, 0.0), (100.0, node.idle)) == pytest.approx(0.1 + 1.2 / CPUS)
    assert node.memory_available == pytest.approx(MEMORY_TOTAL_BYTES * 0.9 - 3 * 1024**3)


def test_a_saturated_node_stays_at_100_percent_and_its_pods_share_what_is_left() -> None:
    node = NodeCounters(
        LoadProfile(cpu=50, memory=90, disk_busy=80, network=NETWORK_CAPACITY_BYTES - 10), updated_at=0.0
    )
    placed(node, "a", PodUsage(milli_cpu=3000, memory=4 * 1024**3, disk_busy=50, network=1000), 0.0, "a")
    placed(node, "b", PodUsage(milli_cpu=1000), 0.0, "b")
    node.advance(10.0)
    assert node.idle == 0.0
    assert node.user + node.system == pytest.approx(10.0)
    assert node.io_time == pytest.approx(10.0)
    assert node.eth0_rx + node.eth0_tx == pytest.approx(10.0 * NETWORK_CAPACITY_BYTES)
    assert node.memory_available == 0.0
    # The background keeps its two cores; the pods get the other two, 3:1 as they want them.
    seconds = {uid: containers[0].cpu_seconds for uid, (_usage, containers) in node.pods.items()}
    assert seconds == pytest.approx({"a": 15.0, "b": 5.0})


def test_a_changed_usage_keeps_the_container_counters_running() -> None:
    node = NodeCounters(LoadProfile(cpu=0), updated_at=0.0)
    placed(node, "a", PodUsage(milli_cpu=1000), 0.0)
    placed(node, "a", PodUsage(milli_cpu=2000), 10.0)
    node.advance(20.0)
    ((usage, (container,)),) = node.pods.values()
    assert usage.milli_cpu == 2000
    assert container.cpu_seconds == pytest.approx(10.0 + 20.0)
    assert node.pod_usage.milli_cpu == 2000


def test_container_series_are_labelled_as_cadvisor_labels_them() -> None:
    node = NodeCounters(LoadProfile(), updated_at=0.0)
    usage = PodUsage(milli_cpu=500, memory=300)
    shares = [ContainerShare("app", 0.8, 2 / 3), ContainerShare("log", 0.2, 1 / 3)]
    node.place("u", usage, container_counters("shop", "web-1", "node-3", usage, shares), 0.0)
    node.advance(10.0)
    labels = 'namespace="shop",pod="web-1",container="{}",node="node-3",instance="node-3:9100"'
    assert container_samples([node]) == [
        (f"container_cpu_usage_seconds_total{{{labels.format('app')}}}", "4.000000"),
        (f"container_cpu_usage_seconds_total{{{labels.format('log')}}}", "1.000000"),
        (f"container_memory_working_set_bytes{{{labels.format('app')}}}", "200"),
        (f"container_memory_working_set_bytes{{{labels.format('log')}}}", "100"),
    ]


def test_every_cpu_of_the_node_has_its_mode_series() -> None:
    series = [name for name, _value in node_samples("n1", NodeCounters(LoadProfile(), 0.0))]
    assert sum('mode="idle"' in name for name in series) == CPUS
