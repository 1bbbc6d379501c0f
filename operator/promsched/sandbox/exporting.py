"""A node-metrics exporter for simulated nodes: node_exporter-format series for every sandbox node.

One scrape returns every node's series, each labelled `instance="<node>:9100"` (Prometheus scrapes it with
`honor_labels`), so a thousand nodes cost one target, not a thousand. Counters are integrated from each
node's load profile, and samples carry their timestamps, so `rate()` over them gives the profile back
exactly. `PUT /profiles/<node>` changes a profile at run time; counters stay continuous across the change.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from aiohttp import web

from promsched.sandbox.profiles import LoadProfile, ProfileError

JOB = "sandbox-nodes"
CPUS = 2
MEMORY_TOTAL_BYTES = 16 * 1024**3
FILESYSTEM_SIZE_BYTES = 100 * 1024**3
ETH0_SPEED_BYTES = 125_000_000  # 1 Gbit/s
LOOPBACK_BYTES_PER_SECOND = 2_000.0
# Busy CPU time is split between modes the way a typical workload does; only idle matters to promsched.
USER_SHARE = 0.7


@dataclass
class NodeCounters:
    profile: LoadProfile
    updated_at: float
    idle: float = 0.0
    user: float = 0.0
    system: float = 0.0
    io_time: float = 0.0
    eth0_rx: float = 0.0
    eth0_tx: float = 0.0
    lo_bytes: float = 0.0

    def advance(self, now: float) -> None:
        elapsed = max(0.0, now - self.updated_at)
        busy = self.profile.cpu / 100.0
        self.idle += elapsed * (1.0 - busy)
        self.user += elapsed * busy * USER_SHARE
        self.system += elapsed * busy * (1.0 - USER_SHARE)
        self.io_time += elapsed * self.profile.disk_busy / 100.0
        self.eth0_rx += elapsed * self.profile.network / 2.0
        self.eth0_tx += elapsed * self.profile.network / 2.0
        self.lo_bytes += elapsed * LOOPBACK_BYTES_PER_SECOND
        self.updated_at = now


HELP = {
    "node_cpu_seconds_total": "counter",
    "node_memory_MemAvailable_bytes": "gauge",
    "node_memory_MemTotal_bytes": "gauge",
    "node_filesystem_avail_bytes": "gauge",
    "node_filesystem_size_bytes": "gauge",
    "node_disk_io_time_seconds_total": "counter",
    "node_network_receive_bytes_total": "counter",
    "node_network_transmit_bytes_total": "counter",
    "node_network_speed_bytes": "gauge",
    "node_uname_info": "gauge",
}


def node_samples(name: str, node: NodeCounters) -> list[tuple[str, str]]:
    """One node's samples as (series, formatted value) pairs; every series' name opens its text."""
    inst = f'instance="{name}:9100"'
    fs = 'device="/dev/vda1",fstype="ext4",mountpoint="/"'
    samples = []
    for cpu in range(CPUS):
        for mode, value in (("idle", node.idle), ("user", node.user), ("system", node.system)):
            samples.append((f'node_cpu_seconds_total{{{inst},cpu="{cpu}",mode="{mode}"}}', f"{value:.6f}"))
    available = MEMORY_TOTAL_BYTES * (1.0 - node.profile.memory / 100.0)
    free_space = FILESYSTEM_SIZE_BYTES * (1.0 - node.profile.disk_used / 100.0)
    samples += [
        (f"node_memory_MemAvailable_bytes{{{inst}}}", f"{available:.0f}"),
        (f"node_memory_MemTotal_bytes{{{inst}}}", f"{MEMORY_TOTAL_BYTES}"),
        (f"node_filesystem_avail_bytes{{{inst},{fs}}}", f"{free_space:.0f}"),
        (f"node_filesystem_size_bytes{{{inst},{fs}}}", f"{FILESYSTEM_SIZE_BYTES}"),
        (f'node_disk_io_time_seconds_total{{{inst},device="vda"}}', f"{node.io_time:.6f}"),
        (f'node_network_receive_bytes_total{{{inst},device="eth0"}}', f"{node.eth0_rx:.3f}"),
        (f'node_network_transmit_bytes_total{{{inst},device="eth0"}}', f"{node.eth0_tx:.3f}"),
        (f'node_network_receive_bytes_total{{{inst},device="lo"}}', f"{node.lo_bytes:.3f}"),
        (f'node_network_transmit_bytes_total{{{inst},device="lo"}}', f"{node.lo_bytes:.3f}"),
        (f'node_network_speed_bytes{{{inst},device="eth0"}}', f"{ETH0_SPEED_BYTES}"),
        (
            f'node_uname_info{{{inst},nodename="{name}",sysname="Linux",machine="x86_64",'
            'release="6.1.0-promsched-sandbox"}',
            "1",
        ),
    ]
    return samples


def write_history(
    profiles: dict[str, LoadProfile],
    since: float,
    until: float,
    step: float,
    out: Path,
    origin: float | None = None,
) -> int:
    """Write the series from `since` to `until` as OpenMetrics for `promtool tsdb create-blocks-from`.
    Counters start at `origin` (default `since`), so pieces of one history written apart are continuous.

    Prometheus' rate() divides by the whole window, so a fresh sandbox would under-report every rate
    until a window's worth of scrapes exists; backfilled history makes windows exact from the start.
    `step` should be the scrape interval: rate() extrapolates by the mean sample spacing, so a window
    mixing sparse history with dense scrapes would be skewed. OpenMetrics wants each metric family
    contiguous, so families are spooled to files of their own and joined at the end. Returns the
    number of samples written.
    """
    # A scrape adds the target's `job`; backfilled samples carry it too, or they would be other series.
    job = f'job="{JOB}"'
    count = 0
    with contextlib.ExitStack() as stack:
        spools: dict[str, IO[str]] = {}
        stamp = since
        while stamp < until:
            for name, profile in profiles.items():
                node = NodeCounters(profile, since if origin is None else origin)
                node.advance(stamp)
                for series, value in node_samples(name, node):
                    family, _, labels = series.partition("{")
                    spool = spools.get(family)
                    if spool is None:
                        spool = spools[family] = stack.enter_context(
                            tempfile.TemporaryFile("w+", dir=out.parent)
                        )
                    spool.write(f"{family}{{{job},{labels} {value} {stamp:.3f}\n")
                    count += 1
            stamp += step
        with out.open("w") as stream:
            for spool in spools.values():
                spool.seek(0)
                shutil.copyfileobj(spool, stream)
            stream.write("# EOF\n")
    return count


@dataclass
class Exporter:
    state_file: Path
    nodes: dict[str, NodeCounters] = field(default_factory=dict)

    @classmethod
    def from_state_file(cls, state_file: Path, since: float | None = None) -> Exporter:
        """Counters start at `since` (the start of the backfilled history) so the two are continuous."""
        profiles = json.loads(state_file.read_text())
        start = time.time() if since is None else since
        nodes = {name: NodeCounters(LoadProfile(**values), start) for name, values in profiles.items()}
        return cls(state_file, nodes)

    def _save(self) -> None:
        profiles = {name: node.profile.as_dict() for name, node in self.nodes.items()}
        temporary = self.state_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(profiles, indent=1, sort_keys=True))
        temporary.replace(self.state_file)

    def render(self) -> str:
        now = time.time()
        stamp = int(now * 1000)
        lines = [f"# TYPE {metric} {kind}" for metric, kind in HELP.items()]
        for name, node in self.nodes.items():
            node.advance(now)
            lines += [f"{series} {value} {stamp}" for series, value in node_samples(name, node)]
        return "\n".join(lines) + "\n"

    async def metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=self.render(), content_type="text/plain", charset="utf-8")

    async def profiles(self, _request: web.Request) -> web.Response:
        return web.json_response({name: node.profile.as_dict() for name, node in self.nodes.items()})

    async def update_profile(self, request: web.Request) -> web.Response:
        name = request.match_info["node"]
        node = self.nodes.get(name)
        if node is None:
            raise web.HTTPNotFound(text=f"no simulated node {name!r}")
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise ProfileError("expected a JSON object of profile fields")
            profile = node.profile.updated(changes, where=name)
        except (ValueError, ProfileError) as error:
            raise web.HTTPBadRequest(text=str(error)) from None
        node.advance(time.time())
        node.profile = profile
        self._save()
        return web.json_response(profile.as_dict())

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/profiles", self.profiles)
        app.router.add_put("/profiles/{node}", self.update_profile)
        return app


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve node_exporter-format series for simulated nodes.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True, help="JSON file of node name -> load profile")
    parser.add_argument("--since", type=float, help="Unix time the counters started (default: now)")
    args = parser.parse_args()
    exporter = Exporter.from_state_file(args.state, args.since)
    web.run_app(exporter.application(), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
