"""A node-metrics exporter for simulated nodes: node_exporter-format series for every sandbox node, and
cAdvisor-format series for every container running on one.

One scrape returns every node's series, each labelled `instance="<node>:9100"` (Prometheus scrapes it with
`honor_labels`), so a thousand nodes cost one target, not a thousand. Counters are integrated from each
node's load profile plus the usage of the pods running on it (see `counters` and `usages`), and samples
carry their timestamps, so `rate()` over them gives the load back exactly. `PUT /profiles/<node>` changes
a profile at run time; counters stay continuous across the change. With `--kubeconfig` the exporter
follows the API server's running pods through a watch (`watching`); `GET /usage` shows what it counts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from aiohttp import web

from promsched.kube.configuring import from_kubeconfig
from promsched.sandbox.node_metrics.counters import HELP, JOB, NodeCounters, container_samples, node_samples
from promsched.sandbox.node_metrics.ledgers import PodLedger
from promsched.sandbox.node_metrics.profiles import LoadProfile, ProfileError
from promsched.sandbox.node_metrics.watching import ApiPodSource, follow_pods

__all__ = ["JOB", "Exporter", "NodeCounters", "write_history"]


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
    ledger: PodLedger = field(init=False)

    def __post_init__(self) -> None:
        self.ledger = PodLedger(self.nodes)

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

    def render(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        stamp = f" {int(now * 1000)}"
        lines = [f"# TYPE {metric} {kind}" for metric, kind in HELP.items()]
        for name, node in self.nodes.items():
            node.advance(now)
            lines += [series + " " + value + stamp for series, value in node_samples(name, node)]
        # Container series carry no timestamp: Prometheus marks a series stale when a scrape lacks it
        # only if the series has none, so a deleted pod's series end at once instead of lingering for
        # the 5-minute lookback (as timestamped cAdvisor series do without track_timestamps_staleness).
        lines += [series + " " + value for series, value in container_samples(self.nodes.values())]
        return "\n".join(lines) + "\n"

    async def metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=self.render(), content_type="text/plain", charset="utf-8")

    async def profiles(self, _request: web.Request) -> web.Response:
        return web.json_response({name: node.profile.as_dict() for name, node in self.nodes.items()})

    async def usage(self, _request: web.Request) -> web.Response:
        """What the pods running on each node add to its load, for people and tests to check."""
        return web.json_response(
            {
                name: {"pods": len(node.pods), **dataclasses.asdict(node.pod_usage)}
                for name, node in self.nodes.items()
            }
        )

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

    def application(self, kubeconfig: Path | None = None) -> web.Application:
        """The exporter's routes; with `kubeconfig`, it follows that cluster's pods while it serves."""
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/profiles", self.profiles)
        app.router.add_get("/usage", self.usage)
        app.router.add_put("/profiles/{node}", self.update_profile)
        if kubeconfig is not None:
            app.cleanup_ctx.append(functools.partial(self._following, kubeconfig))
        return app

    async def _following(self, kubeconfig: Path, _app: web.Application) -> AsyncIterator[None]:
        source = ApiPodSource(from_kubeconfig(kubeconfig))
        task = asyncio.create_task(follow_pods(source, self.ledger))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await source.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve node_exporter-format series for simulated nodes.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True, help="JSON file of node name -> load profile")
    parser.add_argument("--since", type=float, help="Unix time the counters started (default: now)")
    parser.add_argument("--kubeconfig", type=Path, help="follow this cluster's running pods (default: none)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    exporter = Exporter.from_state_file(args.state, args.since)
    web.run_app(
        exporter.application(args.kubeconfig), host="127.0.0.1", port=args.port, print=None, access_log=None
    )


if __name__ == "__main__":
    main()
