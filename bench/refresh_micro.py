"""How long a metrics refresh holds up the scheduling loop, without a cluster:

    python -m bench.refresh_micro [--nodes 5000] [--rounds 5]

A stand-in Prometheus in another process answers every query with one series per node, labelled with
its instance and nodename (so the plugins' queries and node_uname_info's alike; fresh values each time),
five queries a refresh (and node_uname_info and the network plugin's link speeds on the first). In this
process a `Refresher` of the benchmark's policy (five plugins) refreshes `--rounds` times, and after each
refresh the first pod is decided as `Scheduler.schedule_one` does it (the memo a new snapshot starts). The
garbage collector is settled after set-up as the operator settles it once its initial lists are in
(`wiring.settle_collector`: the heap frozen, full collections made rarer). A ticker on the event loop,
asking to wake every millisecond, records how late it woke: the longest wait is how long a pod arriving
then would have waited for the loop. Pods' stand-ins, arriving at 50 a second, each make 6 round trips
to an echo server in a third process (a pod's watch event, binding and event are socket calls
too): each time the loop gives up the GIL for a socket call while the metrics thread parses and scores,
it waits for the GIL's switch interval to take it back (the micro sets the operator's,
`wiring.GIL_SWITCH_SECONDS`; `--switch-interval` to compare). It also reports the process's CPU per
refresh.

Beside the ticker run the operator's own loop-lag watcher (`watch_loop_lag`, which feeds
`promsched_event_loop_lag_seconds` and wakes every 0.1 s), `--watchers` copies a tenth of its interval
apart: each samples the same distribution as the operator's one, so the copies give enough observations
per refresh for a p99. Per round: the histogram's p99 over the observations of that refresh (as
Prometheus's histogram_quantile works it out from the buckets: issue 43's target is under 20 ms) and the
largest lag observed, and the same of the observations made until the refresh returned (so without the
first decision on its snapshot); and after the rounds, both of all rounds together.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import random
import socket
import subprocess
import sys
import textwrap
import time
from typing import Any

from prometheus_client import generate_latest

from bench import commanding
from bench.decide_micro import bench_policy, build, pod
from bench.histograms import Buckets, added, bucketed, histogram_quantile, scraped, summed
from bench.quality_measures import percentile
from promsched.api.policies import parse_spec
from promsched.metrics import NodeDirectory, PrometheusEndpoint, Refresher, plan_from_policy
from promsched.metrics.offloading import new_event_loop
from promsched.operating.wiring import FULL_COLLECTION_EVERY, GIL_SWITCH_SECONDS, settle_collector
from promsched.sandbox.control_plane.supervising import free_port, wait_until
from promsched.scheduling.cycle.deciding import decide
from promsched.scheduling.loop_lag_watching import LAG_PROBE_SECONDS, record, watch_loop_lag
from promsched.scheduling.policies.recording import PolicyStatus
from promsched.scheduling.policies.runtimes import PolicyRuntime

# The stand-in: stdlib only, one answer body per request with the current time, threads for the five
# plugins' concurrent queries.
_SERVER = textwrap.dedent(
    """
    import json, random, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    port, nodes = int(sys.argv[1]), int(sys.argv[2])
    class Answer(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            now = time.time()
            result = [
                {"metric": {"instance": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:9100",
                            "nodename": f"node-{i}"},
                 "value": [now, str(random.uniform(5, 95))]}
                for i in range(nodes)
            ]
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        def log_message(self, *args):
            pass
    ThreadingHTTPServer(("127.0.0.1", port), Answer).serve_forever()
    """
)
# The pods' echo server: a process of its own, so building the stand-in's answers does not slow it.
_ECHO = textwrap.dedent(
    """
    import socket, sys, threading
    def echo(connection):
        while data := connection.recv(4096):
            connection.sendall(data)
    listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
    while True:
        threading.Thread(target=echo, args=(listener.accept()[0],), daemon=True).start()
    """
)


POD_ROUND_TRIPS = 6
POD_INTERVAL_SECONDS = 0.02  # 50 pods/s
POD_CONNECTIONS = 8  # a pod takes a free one, as aiohttp's pool lends them


async def _pods(latencies: list[float], stop: asyncio.Event, echo_port: int) -> None:
    """Pods arriving every POD_INTERVAL_SECONDS until `stop`, each POD_ROUND_TRIPS echoes; their
    latencies from arrival to the last answer."""
    pool: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(POD_CONNECTIONS):
        pool.put_nowait(await asyncio.open_connection("127.0.0.1", echo_port))

    async def one_pod() -> None:
        arrived = time.monotonic()
        reader, writer = connection = await pool.get()
        for _ in range(POD_ROUND_TRIPS):
            writer.write(b"p" * 200)
            await writer.drain()
            await reader.readexactly(200)
        pool.put_nowait(connection)
        latencies.append(time.monotonic() - arrived)

    pods = []
    while not stop.is_set():
        pods.append(asyncio.create_task(one_pod()))
        await asyncio.sleep(POD_INTERVAL_SECONDS)
    await asyncio.gather(*pods)
    while not pool.empty():
        pool.get_nowait()[1].close()


LAG_WATCHERS = 10
LAG_QUANTILE = 0.99


def lag_buckets() -> Buckets:
    """`promsched_event_loop_lag_seconds`'s cumulative bucket counts now, its series summed."""
    return scraped(generate_latest().decode(), "promsched_event_loop_lag_seconds")


async def _lag_watchers(observed: list[tuple[float, float]], copies: int) -> None:
    """`copies` of the operator's loop-lag watcher, each `LAG_PROBE_SECONDS / copies` after the one
    before, feeding its histogram and `observed` (when each woke, and its lag), until cancelled."""

    def observe(lag: float, during_refresh: bool) -> None:
        record(lag, during_refresh)
        observed.append((time.monotonic(), lag))

    async def watcher(offset: float) -> None:
        await asyncio.sleep(offset)
        await watch_loop_lag(observe=observe)

    await asyncio.gather(*(watcher(LAG_PROBE_SECONDS * index / copies) for index in range(copies)))


async def _ticker(lateness: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        asked = loop.time()
        await asyncio.sleep(0.001)
        lateness.append(loop.time() - asked - 0.001)


async def _measure(
    nodes: int, rounds: int, url: str, echo_port: int, full_every: int, switch_interval: float, watchers: int
) -> list[dict[str, Any]]:
    cache, _ = build(nodes)
    plan = plan_from_policy(parse_spec(bench_policy()))
    directory = NodeDirectory.of(cache.nodes)
    refresher = Refresher(plan, PrometheusEndpoint(url=url, timeout_seconds=60), lambda: directory)
    runtime = PolicyRuntime("bench", "", PolicyStatus(history=10), refresher=refresher)
    rng = random.Random(1)
    await refresher.refresh()  # the first: connections opened, nothing measured
    thresholds, switching = gc.get_threshold(), sys.getswitchinterval()
    rows = []
    try:
        sys.setswitchinterval(switch_interval)  # the operator's own by default (`shorten_gil_switches`)
        settle_collector()  # as the operator does once its initial lists are in
        gc.set_threshold(*thresholds[:2], full_every)
        collections = gc.get_stats()[2]["collections"]
        for index in range(rounds):
            lateness: list[float] = []
            latencies: list[float] = []
            observed: list[tuple[float, float]] = []
            stop = asyncio.Event()
            lag_before = lag_buckets()
            watching = asyncio.create_task(_lag_watchers(observed, watchers))
            ticker = asyncio.create_task(_ticker(lateness, stop))
            pods = asyncio.create_task(_pods(latencies, stop, echo_port))
            await asyncio.sleep(0.05)
            cpu = time.process_time()
            snapshot = await refresher.refresh()
            refreshed, started = time.monotonic(), time.process_time()
            outcome = decide(pod(index), cache, snapshot, memo=runtime.memo_for(snapshot), start=0, rng=rng)
            decided = time.process_time()
            if outcome.node is None:
                raise RuntimeError(f"no node for the first pod after refresh {index}: {outcome}")
            await asyncio.sleep(0.05)
            stop.set()
            watching.cancel()
            await asyncio.wait([watching])
            lag = added(lag_before, lag_buckets())
            lags = [lag for _, lag in observed]
            refreshing = [lag for woke, lag in observed if woke <= refreshed]
            refreshing_buckets = bucketed(refreshing, [upper for upper, _ in lag])
            await ticker
            await pods
            rows.append(
                {
                    "round": index,
                    "nodes_sampled": min(len(part.samples) for part in snapshot.plugins.values()),
                    "loop_wait_max_ms": 1000 * max(lateness),
                    "loop_wait_p99_ms": 1000 * percentile(lateness, 0.99),
                    "lag_observations": len(lags),
                    "lag_p99_ms": 1000 * histogram_quantile(LAG_QUANTILE, lag),
                    "lag_max_ms": 1000 * max(lags, default=math.nan),
                    "lag_buckets": lag,
                    "lag_refresh_p99_ms": 1000 * histogram_quantile(LAG_QUANTILE, refreshing_buckets),
                    "lag_refresh_max_ms": 1000 * max(refreshing, default=math.nan),
                    "lag_refresh_buckets": refreshing_buckets,
                    "pods": len(latencies),
                    "pod_p99_ms": 1000 * percentile(latencies, 0.99),
                    "pod_max_ms": 1000 * max(latencies),
                    "refresh_cpu_ms": 1000 * (started - cpu),
                    "first_decide_cpu_ms": 1000 * (decided - started),
                    "full_collections": gc.get_stats()[2]["collections"] - collections,
                }
            )
    finally:
        await refresher.stop()
        gc.unfreeze()  # the process's collector and switching as they were: a caller (a test) may go on
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(switching)
    return rows


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def measure(
    nodes: int,
    rounds: int,
    full_every: int = FULL_COLLECTION_EVERY,
    switch_interval: float = GIL_SWITCH_SECONDS,
    watchers: int = LAG_WATCHERS,
    operator_loop: bool = True,
) -> list[dict[str, Any]]:
    """One row per refresh after the first, against a stand-in Prometheus answering for `nodes` nodes;
    full garbage collections once per `full_every` middle-generation ones, the GIL handed over after
    `switch_interval` seconds, `watchers` copies of the loop-lag watcher; on the operator's event loop
    (the metrics worker's work paced by it, `offloading.new_event_loop`) or else asyncio's own."""
    port, echo_port = free_port(), free_port()
    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(port), str(nodes)])
    echo = subprocess.Popen([sys.executable, "-c", _ECHO, str(echo_port)])
    try:

        def ready() -> bool:
            return _listening(port) and _listening(echo_port)

        wait_until("the stand-in Prometheus and the echo server", ready, 30, interval=0.05)
        url = f"http://127.0.0.1:{port}"
        measuring = _measure(nodes, rounds, url, echo_port, full_every, switch_interval, watchers)
        with asyncio.Runner(loop_factory=new_event_loop if operator_loop else None) as runner:
            return runner.run(measuring)
    finally:
        for process in (server, echo):
            process.terminate()
            process.wait()


def main() -> None:
    parser = commanding.parser(__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--full-collections-every",
        type=int,
        default=FULL_COLLECTION_EVERY,
        help=f"the collector's third threshold (the operator's: {FULL_COLLECTION_EVERY}; Python's: 10)",
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=GIL_SWITCH_SECONDS,
        help=f"seconds before the GIL is handed over (the operator's: {GIL_SWITCH_SECONDS}; Python's: 0.005)",
    )
    parser.add_argument(
        "--watchers",
        type=int,
        default=LAG_WATCHERS,
        help=f"copies of the loop-lag watcher, staggered (default {LAG_WATCHERS})",
    )
    parser.add_argument(
        "--asyncio-loop",
        action="store_true",
        help="asyncio's own event loop, where the metrics worker never pauses (default: the operator's)",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args()
    rows = measure(
        args.nodes,
        args.rounds,
        args.full_collections_every,
        args.switch_interval,
        args.watchers,
        operator_loop=not args.asyncio_loop,
    )
    for row in rows:
        print(
            f"{args.nodes} nodes, round {row['round']}: the loop waited at most "
            f"{row['loop_wait_max_ms']:.1f} ms (p99 {row['loop_wait_p99_ms']:.1f}); {row['pods']} pods "
            f"took at most {row['pod_max_ms']:.1f} ms (p99 {row['pod_p99_ms']:.1f}); refresh "
            f"{row['refresh_cpu_ms']:.0f} ms CPU, first decision after it "
            f"{row['first_decide_cpu_ms']:.1f} ms; {row['full_collections']} full collection(s) so far; "
            f"loop lag p99 {row['lag_p99_ms']:.1f} ms, max {row['lag_max_ms']:.1f} "
            f"({row['lag_observations']} observations), until the refresh returned p99 "
            f"{row['lag_refresh_p99_ms']:.1f}, max {row['lag_refresh_max_ms']:.1f}"
        )
    for label, key in (("during the", "lag"), ("until the return of the", "lag_refresh")):
        pooled = summed([row[f"{key}_buckets"] for row in rows])
        p99 = 1000 * histogram_quantile(LAG_QUANTILE, pooled)
        print(
            f"loop lag {label} {len(rows)} refreshes: p99 {p99:.1f} ms, "
            f"max {max(row[f'{key}_max_ms'] for row in rows):.1f} ms ({pooled[-1][1]:.0f} observations)"
        )
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
