import json
import re
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from promsched.sandbox.node_metrics.counters import CPUS, MEMORY_TOTAL_BYTES, NodeCounters
from promsched.sandbox.node_metrics.exporting import Exporter, write_history
from promsched.sandbox.node_metrics.profiles import LoadProfile
from promsched.sandbox.node_metrics.usages import ANNOTATION
from support.objects import pod_object


def _sample(text: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+) \d+$", text, re.MULTILINE)
    assert match, f"{series} not in the exposition"
    return float(match.group(1))


def test_counters_integrate_the_profile_and_stay_continuous_across_a_change() -> None:
    node = NodeCounters(LoadProfile(cpu=25, disk_busy=50, network=1000), updated_at=100.0)
    node.advance(110.0)
    assert node.idle == 7.5
    assert node.user + node.system == 2.5
    assert node.io_time == 5.0
    assert node.eth0_rx + node.eth0_tx == 10_000
    node.profile = LoadProfile(cpu=100)
    node.advance(120.0)
    assert node.idle == 7.5
    assert node.user + node.system == 12.5


async def test_one_scrape_serves_every_node_with_its_instance(tmp_path: Path) -> None:
    state = tmp_path / "profiles.json"
    state.write_text(json.dumps({"node-0": {"memory": 25.0}, "node-1": {"memory": 75.0}}))
    exporter = Exporter.from_state_file(state)
    async with TestClient(TestServer(exporter.application())) as client:
        text = await (await client.get("/metrics")).text()
    assert (
        _sample(text, 'node_memory_MemAvailable_bytes{instance="node-0:9100"}') == MEMORY_TOTAL_BYTES * 0.75
    )
    assert (
        _sample(text, 'node_memory_MemAvailable_bytes{instance="node-1:9100"}') == MEMORY_TOTAL_BYTES * 0.25
    )
    assert text.count('mode="idle"') == 2 * CPUS
    assert 'node_uname_info{instance="node-1:9100",nodename="node-1"' in text


async def test_profiles_change_at_run_time_and_are_saved(tmp_path: Path) -> None:
    state = tmp_path / "profiles.json"
    state.write_text(json.dumps({"node-0": {}}))
    exporter = Exporter.from_state_file(state)
    async with TestClient(TestServer(exporter.application())) as client:
        updated = await client.put("/profiles/node-0", json={"cpu": 91, "diskUsed": 12})
        assert updated.status == 200
        assert (await updated.json())["cpu"] == 91
        rejected = await client.put("/profiles/node-0", json={"cpu": 191})
        assert rejected.status == 400
        assert "node-0.cpu" in await rejected.text()
        missing = await client.put("/profiles/node-7", json={"cpu": 1})
        assert missing.status == 404
    assert json.loads(state.read_text())["node-0"]["disk_used"] == 12


def test_history_written_in_pieces_from_one_origin_is_one_continuous_series(tmp_path: Path) -> None:
    profiles = {"node-0": LoadProfile(cpu=10)}
    idle = re.compile(r'^node_cpu_seconds_total\{[^}]*cpu="0",mode="idle"\} (\S+) (\S+)$', re.MULTILINE)

    def idle_samples(path: Path) -> list[tuple[float, float]]:
        return [(float(stamp), float(value)) for value, stamp in idle.findall(path.read_text())]

    whole, first, second = tmp_path / "whole.om", tmp_path / "first.om", tmp_path / "second.om"
    write_history(profiles, 1000.0, 1020.0, 2.0, whole)
    write_history(profiles, 1000.0, 1010.0, 2.0, first)
    write_history(profiles, 1010.0, 1020.0, 2.0, second, origin=1000.0)
    assert idle_samples(first) + idle_samples(second) == idle_samples(whole)
    # A counter is 0.9 s idle per second from the origin on, with no reset where the pieces meet.
    assert idle_samples(second)[0] == (1010.0, 9.0)


async def test_running_pods_load_their_node_and_serve_container_series(tmp_path: Path) -> None:
    state = tmp_path / "profiles.json"
    state.write_text(json.dumps({"node-0": {"cpu": 10.0, "memory": 25.0}, "node-1": {}}))
    exporter = Exporter.from_state_file(state, since=1000.0)
    exporter.ledger.clock = lambda: 1000.0
    exporter.ledger.observe(
        pod_object("web", "shop", node_name="node-0", annotations={ANNOTATION: "memory=4Gi"})
    )
    text = exporter.render(now=1010.0)
    assert (
        _sample(text, 'node_memory_MemAvailable_bytes{instance="node-0:9100"}')
        == MEMORY_TOTAL_BYTES * 0.75 - 4 * 1024**3
    )
    labels = 'namespace="shop",pod="web",container="c",node="node-0",instance="node-0:9100"'
    # The pod's default CPU share: half its 100m request, for 10 s.
    # Without a timestamp, so that Prometheus ends the series when the pod ends.
    assert f"container_cpu_usage_seconds_total{{{labels}}} 0.500000\n" in text
    assert f"container_memory_working_set_bytes{{{labels}}} {4 * 1024**3}\n" in text
    assert "# TYPE container_cpu_usage_seconds_total counter" in text
    async with TestClient(TestServer(exporter.application())) as client:
        usage = await (await client.get("/usage")).json()
    assert usage["node-0"] == {
        "pods": 1,
        "milli_cpu": 50,
        "memory": 4 * 1024**3,
        "disk_busy": 0.0,
        "network": 0,
    }
    assert usage["node-1"]["pods"] == 0
