"""memory's and diskSpace's used percent sent as each node's available bytes and its totals, divided here:
the same node values as the whole query (promtool over kube-prometheus-stack's series, two hosts caught
mid-rollout with two node_exporter pods each, one host with two filesystems at /), and the totals asked
once, kept across refreshes, and asked again for a filesystem they lack."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kube_prometheus_stack as kps
import pytest
from aiohttp import web

from promsched.api.plugin_specs import PluginSpec
from promsched.metrics import NodeDirectory, PrometheusClient, Snapshot, plan_from_policy, take_snapshot
from promsched.metrics.dividing import Divisors, SplitQuery, divided, used_percent_split
from promsched.metrics.identifying import NodeIdentity
from promsched.metrics.plugins import build_plugin
from promsched.metrics.samples import QueryResult, Series
from support.fake_prometheus import FakePrometheus, RecordedRequest
from support.promtool import assert_evaluates_to, gauge

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")

Answer = list[tuple[dict[str, str], float]]

# Bytes available and in total, per host.
MEMORY = {"worker-01": (25.0, 100.0), "worker-02": (60.0, 200.0), "worker-03": (10.0, 40.0)}
# (device, fstype, available, size) at "/", per host: worker-02's second disk is the fuller, so it counts.
ROOT = {
    "worker-01": [("/dev/vda1", "ext4", 40.0, 100.0)],
    "worker-02": [("/dev/nvme0n1p1", "xfs", 30.0, 100.0), ("/dev/nvme1n1", "ext4", 10.0, 200.0)],
    "worker-03": [("/dev/sda1", "ext4", 75.0, 100.0)],
}
BOOT = [("/dev/vda15", "vfat", 1.0, 100.0)]


def input_series() -> list[dict[str, str]]:
    """Every host's memory and filesystems, once per node_exporter pod scraping it."""
    series = []
    for host in kps.HOSTS:
        available, total = MEMORY[host.node]
        for pod in host.pods:
            target = host.target_labels(pod)
            series += [
                gauge("node_memory_MemAvailable_bytes", target, available),
                gauge("node_memory_MemTotal_bytes", target, total),
            ]
            for mountpoint, filesystems in (("/", ROOT[host.node]), ("/boot", BOOT)):
                for device, fstype, free, size in filesystems:
                    labels = {**target, "device": device, "fstype": fstype, "mountpoint": mountpoint}
                    series += [
                        gauge("node_filesystem_avail_bytes", labels, free),
                        gauge("node_filesystem_size_bytes", labels, size),
                    ]
    return series


def parts(settings: dict[str, Any]) -> dict[str, list[tuple[dict[str, str], float, float]]]:
    """Per node: (labels the parts keep beside the node's, available, total) of what `settings` reads."""
    if settings["name"] == "memory":
        return {node: [({}, *values)] for node, values in MEMORY.items()}
    at_mountpoint = BOOT if settings.get("mountpoint") == "/boot" else None
    return {
        node: [
            ({"device": device, "fstype": fstype}, free, size)
            for device, fstype, free, size in (at_mountpoint or filesystems)
        ]
        for node, filesystems in ROOT.items()
    }


def answers(identity: NodeIdentity, settings: dict[str, Any]) -> tuple[Answer, Answer, Answer]:
    """What the numerator, the divisor and the whole query give: the whole one's values worked out as
    Prometheus works them, 100 * (1 - available / total), the highest of each node's."""
    numerator, divisor, whole = [], [], []
    for node, filesystems in parts(settings).items():
        node_labels = kps.result_labels(identity, kps.host_of(node))
        for labels, free, size in filesystems:
            numerator.append(({**node_labels, **labels}, free))
            divisor.append(({**node_labels, **labels}, size))
        whole.append((node_labels, 100 * max(1 - free / size for _, free, size in filesystems)))
    return numerator, divisor, whole


def result(query: str, answer: Answer) -> QueryResult:
    return QueryResult(query, tuple(Series(labels, value, 0.0) for labels, value in answer))


def split_of(settings: dict[str, Any], identity: NodeIdentity) -> tuple[str, SplitQuery]:
    plugin = build_plugin(PluginSpec.model_validate(settings), identity)
    assert plugin.split is not None
    return plugin.query, plugin.split


SETTINGS = [
    {"name": "memory", "timeRange": "0s"},
    {"name": "memory", "timeRange": "5m", "aggregation": "max"},
    {"name": "diskSpace", "timeRange": "0s"},
    {"name": "diskSpace", "timeRange": "5m", "aggregation": "p90", "mountpoint": "/boot"},
]


@needs_promtool
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(map(str, s.values())))
@pytest.mark.parametrize("identity", kps.IDENTITIES, ids=lambda i: i.source.value)
def test_the_parts_divided_give_what_the_whole_query_gives(
    tmp_path: Path, settings: dict[str, Any], identity: NodeIdentity
) -> None:
    query, split = split_of(settings, identity)
    numerator, divisor, whole = answers(identity, settings)
    series = input_series()
    assert_evaluates_to(tmp_path, series, query, whole)
    assert_evaluates_to(tmp_path, series, split.numerator, numerator)
    assert_evaluates_to(tmp_path, series, split.divisor, divisor)

    answer = divided(
        result("available", numerator), Divisors.of(result("totals", divisor), split, 0.0), split, "q"
    )

    assert sorted(((dict(s.labels), s.value) for s in answer.series), key=str) == sorted(whole, key=str)
    assert answer.query == "q"


SPLIT = used_percent_split("a", "t", "instance", "instance", per=("device",))


def test_the_fullest_filesystem_counts_and_one_without_a_size_is_left_out() -> None:
    available = result(
        "a",
        [
            ({"instance": "n", "device": "a"}, 30.0),
            ({"instance": "n", "device": "b"}, 5.0),
            ({"instance": "n", "device": "c"}, 0.0),  # no size: left out, as Prometheus's match leaves it
            ({"instance": "m", "device": "a"}, 5.0),
        ],
    )
    sizes = result("t", [({"instance": "n", "device": "a"}, 100.0), ({"instance": "n", "device": "b"}, 20.0)])

    answer = divided(available, Divisors.of(sizes, SPLIT, 0.0), SPLIT, "whole")

    assert answer.series == (Series({"instance": "n"}, 75.0, 0.0),)  # b: 75%, a: 70%
    assert answer.non_finite == ()


def test_a_nan_counts_only_where_every_filesystem_gives_one() -> None:
    available = QueryResult(
        "a",
        (Series({"instance": "n", "device": "b"}, 10.0, 0.0),),
        (
            Series({"instance": "n", "device": "a"}, float("nan"), 0.0),
            Series({"instance": "m", "device": "a"}, float("nan"), 0.0),
        ),
    )
    sizes = result("t", [({"instance": i, "device": d}, 100.0) for i in "nm" for d in "ab"])

    answer = divided(available, Divisors.of(sizes, SPLIT, 0.0), SPLIT, "whole")

    assert answer.series == (Series({"instance": "n"}, 90.0, 0.0),)
    [(labels, value, _)] = answer.non_finite
    assert labels == {"instance": "m"}
    assert value != value  # NaN


NODES = NodeDirectory.of(["node-0", "node-1"])
TOTALS = ("node_memory_MemTotal_bytes", "node_filesystem_size_bytes")


class Fake:
    """A fake Prometheus's answers: each node's available bytes and totals per device."""

    def __init__(self, prometheus: FakePrometheus, free: dict[str, float], sizes: dict[str, float]) -> None:
        self.prometheus, self.free, self.sizes = prometheus, free, sizes
        prometheus.handler = self.answer

    async def answer(self, request: RecordedRequest) -> web.StreamResponse:
        values = self.sizes if any(metric in request.query for metric in TOTALS) else self.free
        items = [
            ({"instance": f"{key.split('/')[0]}:9100", "device": key.partition("/")[2]}, value)
            for key, value in values.items()
        ]
        return self.prometheus.vector(*items, at=float(request.form["time"]))

    def total_queries(self) -> int:
        return sum(any(metric in query for metric in TOTALS) for query in self.prometheus.queries())


def used(snapshot: Snapshot, plugin: str) -> dict[str, float]:
    return {node: sample.value for node, sample in snapshot.plugins[plugin].samples.items()}


@pytest.mark.parametrize("plugin", ["memory", "diskSpace"])
async def test_totals_are_asked_once_and_kept_while_fresh(
    prometheus: FakePrometheus, make_spec: Callable[..., Any], plugin: str
) -> None:
    plan = plan_from_policy(
        make_spec({"name": plugin}, nodeIdentity={"source": "Label", "label": "instance"}, staleAfter="2m")
    )
    fake = Fake(prometheus, {"node-0/": 25.0, "node-1/": 50.0}, {"node-0/": 100.0, "node-1/": 200.0})
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(plan, client, NODES)
        fake.free = {"node-0/": 50.0, "node-1/": 100.0}
        second = await take_snapshot(plan, client, NODES, previous=first)

    assert used(first, plugin) == {"node-0": 75.0, "node-1": 75.0}
    assert used(second, plugin) == {"node-0": 50.0, "node-1": 50.0}  # the totals kept
    assert fake.total_queries() == 1
    assert len(prometheus.queries()) == 3


async def test_sizes_are_asked_again_for_a_filesystem_they_lack(
    prometheus: FakePrometheus, make_spec: Callable[..., Any]
) -> None:
    plan = plan_from_policy(
        make_spec({"name": "diskSpace"}, nodeIdentity={"source": "Label", "label": "instance"})
    )
    fake = Fake(prometheus, {"node-0/sda": 50.0}, {"node-0/sda": 100.0})
    async with PrometheusClient(prometheus.endpoint(retries=0)) as client:
        first = await take_snapshot(plan, client, NODES)
        fake.free, fake.sizes = (
            {"node-0/sda": 50.0, "node-0/sdb": 10.0},
            {"node-0/sda": 100.0, "node-0/sdb": 100.0},
        )
        second = await take_snapshot(plan, client, NODES, previous=first)

    assert fake.total_queries() == 2
    assert used(first, "diskSpace") == {"node-0": 50.0}
    assert used(second, "diskSpace") == {"node-0": 90.0}
