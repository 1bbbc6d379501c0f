"""What promsched's queries cost Prometheus, without a cluster:

    python -m bench.query_cost [--nodes 5000] [--repeats 5]

Writes `--history` seconds of the sandbox exporter's node_exporter series for `--nodes` nodes (a sample
every `--scrape-interval` seconds: 2 by default, as the sandbox scrapes; kube-prometheus-stack scrapes
node_exporter every 30), backfills them with promtool into a fresh Prometheus, and asks each of the
benchmark policy's plugin queries `--repeats` times at the history's end, one at a time. For each it
reports the series answered, the samples Prometheus read to answer (its query stats'
totalQueryableSamples: what a query costs, whatever else the machine does), the answer's bytes (JSON,
and gzipped as promsched asks), and Prometheus's CPU (its /proc stat) and memory allocated
(go_memstats_alloc_bytes_total) per query: first as promsched sends them,
with node_uname_info and the network query's link speeds asked apart (`network link speeds`), each
once per staleAfter (every `ASKED_EVERY` refreshes at the policy's settings); the network query whole,
as it was sent before (`network (whole)`); the plugins as promsched sent them before
1aae93c, each joined with node_uname_info; the rebalancer's sustained query for cpu both ways; and the
benchmark's rules variant's queries (`source: RecordingRules`), over the sandbox's node mixin rules,
which promtool evaluates over the same history first. The data sit in persisted blocks, so the figures
are lower than a live Prometheus's (whose last minutes are in its head) and compare queries, not
machines. What evaluating the rules costs is not counted: kube-prometheus-stack evaluates them whether
or not promsched reads them.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from bench import commanding
from bench.variants import VARIANTS, policy_spec
from promsched.api.fields import parse_duration
from promsched.api.plugin_specs import PluginSpec
from promsched.api.policies import NodeIdentity as NodeIdentitySpec
from promsched.metrics.identifying import UNAME_QUERY, NodeIdentity
from promsched.metrics.plugins import build_plugin
from promsched.metrics.sustaining import sustained_query
from promsched.sandbox.control_plane.supervising import free_port, http_ok, wait_until
from promsched.sandbox.node_metrics import exporting, recording_rules
from promsched.sandbox.node_metrics.monitoring import SCRAPE_SECONDS
from promsched.sandbox.node_metrics.profiles import LoadProfile

# What each query carried until 1aae93c: the baseline the figures are compared with.
JOIN = " * on(instance) group_left(nodename) max by (instance, nodename) (node_uname_info)"
SUSTAINED_WINDOW_SECONDS = 300.0
RULES = " (rules)"
JOINED = " (joined)"
WHOLE = " (whole)"  # a split query sent whole, as before the split
LINK_SPEEDS = " link speeds"  # a split query's divisor, asked once per staleAfter
UNAME = "node_uname_info"  # asked once per staleAfter now; every refresh before
RULES_VARIANT = next(variant for variant in VARIANTS if variant.metric_source is not None)
REFRESH_SECONDS = 15.0  # the operator's default refreshInterval
# What promsched keeps across refreshes (a split query's divisor, node_uname_info's hostnames) is asked
# again when staleAfter old: once per this many refreshes.
ASKED_EVERY = math.ceil(parse_duration(policy_spec("", "")["staleAfter"], "staleAfter") / REFRESH_SECONDS)


def every_refresh(name: str) -> bool:
    """Whether a query of `queries()` is one promsched sends on every refresh now."""
    return (
        not any(part in name for part in (JOINED, WHOLE, LINK_SPEEDS, RULES))
        and not name.startswith("sustained")
        and name != UNAME
    )


def kept_across_refreshes(name: str) -> bool:
    """Whether a query of `queries()` is one promsched sends once per staleAfter now (`ASKED_EVERY`)."""
    return name.endswith(LINK_SPEEDS) or name == UNAME


def queries() -> dict[str, str]:
    """name -> PromQL: the bench policy's plugins as sent (a split one's parts) and the uname query, the
    split ones whole, then the plugins joined."""
    identity = NodeIdentity.from_spec(NodeIdentitySpec())
    plugins = [
        build_plugin(PluginSpec.model_validate(spec), identity) for spec in policy_spec("", "")["plugins"]
    ]
    now = {plugin.name: plugin.split.numerator if plugin.split else plugin.query for plugin in plugins} | {
        UNAME: UNAME_QUERY
    }
    split = {f"{p.name}{LINK_SPEEDS}": p.split.divisor for p in plugins if p.split} | {
        f"{p.name}{WHOLE}": p.query for p in plugins if p.split
    }
    before = {f"{plugin.name}{JOINED}": f"({plugin.query}){JOIN}" for plugin in plugins}
    cpu = plugins[0]
    joined_cpu = copy.copy(cpu)  # the same plugin, its query as it was sent before
    joined_cpu.query = f"({cpu.query}){JOIN}"
    sustained = {
        "sustained cpu": sustained_query(cpu, SUSTAINED_WINDOW_SECONDS, higher_is_better=False),
        f"sustained cpu{JOINED}": sustained_query(
            joined_cpu, SUSTAINED_WINDOW_SECONDS, higher_is_better=False
        ),
    }
    spec = policy_spec("", "", variant=RULES_VARIANT)
    by_name = NodeIdentity.from_spec(NodeIdentitySpec.model_validate(spec["nodeIdentity"]))
    rules = {
        f"{plugin.name}{RULES}": plugin.query
        for plugin in (build_plugin(PluginSpec.model_validate(entry), by_name) for entry in spec["plugins"])
        if plugin.name != "diskSpace"  # no rule: the same query as above
    }
    return now | split | before | sustained | rules


class Prometheus:
    """A Prometheus over `data`, with no scrapes: queries only."""

    def __init__(self, directory: Path) -> None:
        config = directory / "prometheus.yml"
        config.write_text("global: {}\n")
        self.url = f"http://127.0.0.1:{free_port()}"
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address={self.url.removeprefix('http://')}",
                "--storage.tsdb.retention.time=100y",
                "--log.level=error",
            ]
        )
        wait_until("Prometheus /-/ready", lambda: http_ok(f"{self.url}/-/ready"), 120)

    def answer_sizes(self, expression: str, at: float) -> tuple[int, int]:
        """Bytes of the answer on the wire (gzip, as promsched asks) and decoded."""
        data = urllib.parse.urlencode({"query": expression, "time": at}).encode()
        headers = {"Accept-Encoding": "gzip"}
        request = urllib.request.Request(f"{self.url}/api/v1/query", data=data, headers=headers)
        with urllib.request.urlopen(request, timeout=300) as response:
            body = response.read()
            encoded = response.headers.get("Content-Encoding") == "gzip"
        return len(body), len(gzip.decompress(body) if encoded else body)

    def query(self, expression: str, at: float) -> int:
        """The series answered."""
        return len(self._answer(expression, at, {})["result"])

    def samples_read(self, expression: str, at: float) -> int:
        """The samples Prometheus read to answer (its query stats; VictoriaMetrics keeps none)."""
        stats = self._answer(expression, at, {"stats": "all"})["stats"]
        return int(stats["samples"]["totalQueryableSamples"])

    def _answer(self, expression: str, at: float, asked: dict[str, str]) -> dict[str, Any]:
        data = urllib.parse.urlencode({"query": expression, "time": at, **asked}).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=data, timeout=300) as response:
            answer: dict[str, Any] = json.load(response)["data"]
        return answer

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def allocated_bytes(self) -> float:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("go_memstats_alloc_bytes_total "):
                    return float(line.split()[1])
        raise RuntimeError("Prometheus's /metrics has no go_memstats_alloc_bytes_total")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


def _record_rules(directory: Path, prometheus: Prometheus, since: float, until: float) -> None:
    """The sandbox's node mixin rules evaluated over the history into blocks beside the raw ones (read
    once Prometheus restarts). load-watcher's copies are left out: promtool evaluates each rule over the
    raw series alone."""
    rules = directory / "rules.yml"
    records = [
        {"record": name, "expr": expr} for name, expr in recording_rules.NODE_MIXIN_RULES_BY_NODE_NAME.items()
    ]
    group = {"name": "node-exporter.rules", "interval": recording_rules.EVALUATION_INTERVAL, "rules": records}
    rules.write_text(yaml.safe_dump({"groups": [group]}))
    recorded = directory / "recorded"
    command = ["promtool", "tsdb", "create-blocks-from", "rules", "--quiet", f"--url={prometheus.url}"]
    window = [f"--start={int(since)}", f"--end={int(until)}", f"--output-dir={recorded}"]
    subprocess.run([*command, *window, str(rules)], check=True, capture_output=True)
    for block in recorded.iterdir():
        block.rename(directory / "data" / block.name)


def measure(
    nodes: int, repeats: int, history: float = 300.0, scrape_seconds: float = SCRAPE_SECONDS
) -> list[dict[str, Any]]:
    """One row per query: series answered, samples read, CPU ms and MB allocated per query (mean of
    `repeats`), over series sampled every `scrape_seconds`."""
    with tempfile.TemporaryDirectory(prefix="promsched-query-cost-") as workdir:
        directory = Path(workdir)
        until = time.time()
        profiles = {f"node-{index}": LoadProfile() for index in range(nodes)}
        exporting.write_history(profiles, until - history, until, scrape_seconds, directory / "history.om")
        backfill = ["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet"]
        subprocess.run([*backfill, str(directory / "history.om"), str(directory / "data")], check=True)
        prometheus = Prometheus(directory)
        try:
            _record_rules(directory, prometheus, until - history, until)
        finally:
            prometheus.stop()
        prometheus = Prometheus(directory)
        try:
            at = until - scrape_seconds
            rows = []
            for name, expression in queries().items():
                series = prometheus.query(expression, at)  # once first: its blocks paged in
                samples = prometheus.samples_read(expression, at)
                cpu, allocated = prometheus.cpu_seconds(), prometheus.allocated_bytes()
                for _ in range(repeats):
                    prometheus.query(expression, at)
                spent, allocated = prometheus.cpu_seconds() - cpu, prometheus.allocated_bytes() - allocated
                wire, decoded = prometheus.answer_sizes(expression, at)
                rows.append(
                    {
                        "query": name,
                        "series": series,
                        "samples": samples,
                        "wire_kb": wire / 1e3,
                        "json_kb": decoded / 1e3,
                        "cpu_ms": 1000 * spent / repeats,
                        "allocated_mb": allocated / repeats / 1e6,
                    }
                )
            return rows
        finally:
            prometheus.stop()


TOTALLED = ("queries", "series", "samples", "wire_kb", "json_kb", "cpu_ms", "allocated_mb")


def refresh_totals(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """A refresh's sum: as sent now (the plugins; a split one's divisor and node_uname_info an
    `ASKED_EVERY`th of the time), whole (the split queries whole and node_uname_info every refresh, as
    before the split), before (the plugins joined, before 1aae93c) and with the rules (the rule queries
    and diskSpace's; nodes named by `instance`, so no node_uname_info)."""
    by_name = {row["query"]: row for row in rows if not row["query"].startswith("sustained")}
    sent = [(row, 1.0) for name, row in by_name.items() if every_refresh(name)]
    now = sent + [(row, 1 / ASKED_EVERY) for name, row in by_name.items() if kept_across_refreshes(name)]
    split = {name.removesuffix(WHOLE) for name in by_name if name.endswith(WHOLE)}
    whole = [(row, 1.0) for name, row in by_name.items() if name.endswith(WHOLE) or name == UNAME] + [
        (row, 1.0) for name, row in by_name.items() if every_refresh(name) and name not in split
    ]
    joined = [(row, 1.0) for name, row in by_name.items() if name.endswith(JOINED)]
    rules = [(row, 1.0) for name, row in by_name.items() if name.endswith(RULES)] + [
        (by_name["diskSpace"], 1.0)
    ]
    return {
        label: {
            key: sum(share * (1 if key == "queries" else row[key]) for row, share in chosen)
            for key in TOTALLED
        }
        for label, chosen in (("now", now), ("whole", whole), ("before", joined), ("rules", rules))
    }


def main() -> None:
    parser = commanding.parser(__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--history", type=float, default=300.0, help="seconds of node series (default 300)")
    commanding.add_scrape_interval(parser, SCRAPE_SECONDS, "a series' samples")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args()
    rows = measure(args.nodes, args.repeats, args.history, args.scrape_interval)
    for row in rows:
        print(
            f"{row['query']:24} {row['series']:6} series {row['samples']:9} samples  "
            f"{row['json_kb']:7.1f} kB ({row['wire_kb']:5.1f} gzipped)  {row['cpu_ms']:7.1f} ms CPU  "
            f"{row['allocated_mb']:6.1f} MB allocated"
        )
    for label, total in refresh_totals(rows).items():
        print(
            f"a refresh, {label}: {total['queries']:.2f} queries, {total['series']:.0f} series, "
            f"{total['samples']:.0f} samples, "
            f"{total['json_kb']:.0f} kB ({total['wire_kb']:.1f} gzipped), {total['cpu_ms']:.0f} ms CPU, "
            f"{total['allocated_mb']:.0f} MB allocated"
        )
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
