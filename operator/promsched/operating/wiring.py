"""The one module that imports Kopf: it wires watch events into the scheduler and runs the operator.

Every kind of the intake's table (`kinds.WATCHED`: pods waiting for a node, nodes, and what placement
rules read) is followed with `@kopf.on.event` only, so Kopf writes nothing on them (no annotations, no
finalizers); SchedulingPolicies too, since the scheduler tracks generations itself. Pods bound to nodes
are followed by the intake on a watch of its own (`intake.bound_pods`).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import gc
import logging
import os
import socket
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import kopf
from aiohttp import web

from promsched.api.policies import GROUP, PLURAL, VERSION
from promsched.kube.configuring import discover
from promsched.kube.credentials import Credentials
from promsched.kube.requests import LIST_PAGE_SIZE
from promsched.kube.sending import ApiError, KubeClient, open_session
from promsched.kube.throttling import TokenBucket
from promsched.metrics.offloading import new_event_loop
from promsched.operating import listening, serving
from promsched.operating.leasing import LeaseElector
from promsched.operating.secrets import SecretCache
from promsched.scheduling.intake.bound_pods import UNBOUND_PODS
from promsched.scheduling.intake.kinds import WATCHED, Kind
from promsched.scheduling.schedulers import Scheduler

logger = logging.getLogger(__name__)

# Watches are re-opened this often even when healthy, and a connection silent for longer than the
# client timeout is dropped and re-opened: Kopf's defaults would wait on a dead watch forever.
WATCH_SERVER_TIMEOUT = 300
WATCH_CLIENT_TIMEOUT = 330
WATCH_CONNECT_TIMEOUT = 10
# Kopf keeps a worker per object (two tasks and a queue, ~7 KB) until it has had no event for this long.
# Its default, 5 s, held a worker for every pod created in the last 5 s of a burst: ~35 MB with 5000
# pending (`python -m bench.memory_micro --part workers`). A pod's events that come further apart than
# this start a new worker, which costs no more CPU than keeping one (`bench.kopf_micro`).
KOPF_WORKER_IDLE_SECONDS = 0.5
# Connections to the API server opened once the initial lists are in (`KubeClient.warm`): above the 4-5
# that a fresh operator opened in a 1000-node run at 50 pods/s, each a TLS handshake (2.5-42 ms) on a
# pod's binding. Idle ones close after `sending.KEEPALIVE_SECONDS`.
WARM_CONNECTIONS = 8


@dataclass(frozen=True)
class RunOptions:
    kubeconfig: Path | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    listen: str = "127.0.0.1:8080"
    leader_elect: bool = False
    lease_namespace: str = "default"
    lease_name: str = "promsched"
    allowed_prometheus_hosts: frozenset[str] | None = None
    # A watch stream that delivers nothing (not even a bookmark) for this long is dropped and re-opened.
    watch_inactivity_timeout: float = 70.0
    # Every kind is listed again this often, to find and repair what the watches missed; 0: never.
    resync_interval: float = 300.0
    # How long a pod that fits nowhere waits for a helpful cluster event (kube's
    # podMaxInUnschedulablePodsDuration).
    max_unschedulable_seconds: float = 300.0
    # How long a pod's WaitForFirstConsumer claims may take to be bound (kube's bindTimeoutSeconds).
    bind_timeout: float = 600.0
    # The client-side rate limit of the operator's requests, as kube-scheduler's flags of these names.
    kube_api_qps: float = 50.0
    kube_api_burst: int = 100
    # Off: every policy's rebalance Enforce runs as DryRun (the kill switch).
    rebalance_evictions: bool = True


@dataclass
class Runtime:
    options: RunOptions
    credentials: Credentials
    client: KubeClient
    scheduler: Scheduler
    listener: socket.socket  # bound before Kopf starts (see `listening`)
    loop_task: asyncio.Task[None] | None = None
    elector_task: asyncio.Task[None] | None = None
    freeze_task: asyncio.Task[None] | None = None
    warm_task: asyncio.Task[None] | None = None
    site: web.AppRunner | None = None
    failure: str | None = None  # why the startup handler failed


class Memo(kopf.Memo):
    """Kopf's memo: handlers get it as `memo` (each watched object a shallow copy, so the same
    runtime)."""

    runtime: Runtime


class NoDiffBase(kopf.DiffBaseStorage):
    """No last-handled state: only `on.event` handlers are registered, which need none, and Kopf's
    default would deep-copy every pod and node for each of their events."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[kopf.FieldSpec] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


class NoProgress(kopf.ProgressStorage):
    """No handler progress: `on.event` handlers keep none, and Kopf's default deep-copies each event's
    essence to clear it of progress that is never there (3% of Kopf's CPU per pod event, cProfile of
    its process_resource_event with promsched's handlers)."""

    def fetch(self, *, key: kopf.HandlerId, body: kopf.Body) -> kopf.ProgressRecord | None:
        return None

    def store(
        self, *, key: kopf.HandlerId, record: kopf.ProgressRecord, body: kopf.Body, patch: kopf.Patch
    ) -> None:
        return None

    def purge(self, *, key: kopf.HandlerId, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        return None

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence  # NoDiffBase builds a new, empty one for each event


@kopf.on.login()
async def login(memo: Memo, **_: Any) -> kopf.AiohttpSession:
    """Kopf's watches get a session like promsched's own client: the same token source (renewed on
    expiry and after a 401 without Kopf logging in again), proxy and tls-server-name, which Kopf's
    ConnectionInfo cannot carry. Unlimited connections, as Kopf's own: each watch holds one. Not
    rate-limited: Kopf's lists and watches are its own, not the operator's client's."""
    credentials = memo.runtime.credentials
    return kopf.AiohttpSession(
        aiohttp_session=open_session(credentials, connections=0),
        server=credentials.server,
        default_namespace=credentials.default_namespace,
    )


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: Memo, **_: Any) -> None:
    """A failure stops Kopf (`run` raises StartupError) instead of being retried every minute while
    nothing is scheduled: nothing in here gets better by waiting."""
    runtime = memo.runtime
    try:
        await _start(settings, runtime)
    except Exception as error:
        await _stop(runtime)
        runtime.failure = f"startup failed: {error}"
        raise kopf.PermanentError(runtime.failure) from error


def configure(settings: kopf.OperatorSettings, options: RunOptions) -> None:
    """Kopf's settings for promsched (the startup handler applies them; bench.kopf_micro too)."""
    settings.watching.server_timeout = WATCH_SERVER_TIMEOUT
    settings.watching.client_timeout = WATCH_CLIENT_TIMEOUT
    settings.watching.connect_timeout = WATCH_CONNECT_TIMEOUT
    settings.watching.inactivity_timeout = options.watch_inactivity_timeout
    # The resources are fixed and the CRD is installed before the operator: watching CRDs for new ones
    # would only need an extra RBAC grant (and retry forbidden errors for a minute without it).
    settings.scanning.disabled = True
    # Kopf lists each kind whole before watching by default; pages bound the memory that takes.
    settings.watching.chunk_size = LIST_PAGE_SIZE
    # Kopf's handlers follow the pods waiting for a node; the intake follows the bound ones on a watch
    # of its own, which costs a fraction of Kopf's per-object work (see `bound_pods`).
    settings.watching.field_selectors["", "v1", "pods"] = UNBOUND_PODS
    settings.queueing.idle_timeout = KOPF_WORKER_IDLE_SECONDS
    settings.networking.request_timeout = 60
    # Kopf would post its handler logs as Kubernetes events on every pod; the scheduler posts its own.
    settings.posting.enabled = False
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.persistence.progress_storage = NoProgress()


async def _start(settings: kopf.OperatorSettings, runtime: Runtime) -> None:
    configure(settings, runtime.options)
    shorten_gil_switches()
    await runtime.client.__aenter__()
    supervisor = runtime.scheduler.supervisor  # the operator's long-lived tasks, all supervised
    runtime.loop_task = supervisor.start("scheduler", runtime.scheduler.run)
    runtime.freeze_task = supervisor.start("gc-freeze", lambda: freeze_when_synced(runtime.scheduler.synced))
    runtime.warm_task = supervisor.start(
        "connection-warmup", lambda: warm_when_synced(runtime.scheduler.synced, runtime.client)
    )
    options = runtime.options
    if options.leader_elect:
        runtime.scheduler.leading.clear()

        def on_change(leading: bool) -> None:
            (runtime.scheduler.leading.set if leading else runtime.scheduler.leading.clear)()

        elector = LeaseElector(
            runtime.client,
            options.lease_namespace,
            options.lease_name,
            f"{socket.gethostname()}-{os.getpid()}",
            on_change,
        )
        runtime.elector_task = supervisor.start("leader-election", elector.run)

    def loop_alive() -> bool:
        return runtime.loop_task is not None and not runtime.loop_task.done()

    app = serving.application(
        lambda: serving.liveness_problems(loop_alive, supervisor.failing),
        lambda: serving.readiness_problems(runtime.scheduler, loop_alive),
        lambda: serving.record_state(runtime.scheduler),
    )
    runtime.site = web.AppRunner(app, access_log=None)
    await runtime.site.setup()
    await web.SockSite(runtime.site, runtime.listener).start()
    logger.info("promsched serving /metrics, /healthz, /readyz on %s", options.listen)


# How long a thread that wants the GIL waits for the one holding it (Python's default: 5 ms). The metrics
# thread parses and scores a refresh (a quarter to half a second of CPU at 5000 nodes) while the event
# loop gives up the GIL at every socket call and waits this long to take it back each time. With 5 ms,
# pods of 6 loopback round trips arriving at 50 pods/s during a refresh waited 76-89 ms at p99, with
# 0.5 ms 8 ms (bench.refresh_micro, 5000 nodes). A real pod makes many more socket calls (TLS, Kopf's
# watch): in make bench at 5000 nodes and 50 pods/s, interleaved, 0.5 ms left the loop's lag during
# refreshes at 18-87 ms p99 and 0.1 ms at 5-20, though a later run at 0.1 ms gave 19-89 (the spread of
# these runs on 2 shared cores). Without a second thread wanting the GIL it changes nothing.
GIL_SWITCH_SECONDS = 0.0001


def shorten_gil_switches() -> None:
    sys.setswitchinterval(GIL_SWITCH_SECONDS)


# Full collections after the freeze: one per this many middle-generation collections (Python's default
# is 10). Each walks everything kept since the freeze, at 5000 nodes mostly the metrics snapshots and
# their scores: 40-45 ms with the event loop held (bench.refresh_micro), about two passes per refresh at
# Python's default, one per 5 refreshes at 100, none in 20 at 1000 (loop lag p99 over 20 refreshes 30-32
# against 17-19 ms). Rarer passes hold no more memory: Kopf's per-pod cycles (48 objects, 4 KB a pod) die
# in the young generations (10,000 pods through Kopf's watch path: the same peak RSS at 100 and 1000).
FULL_COLLECTION_EVERY = 1000


async def freeze_when_synced(synced: asyncio.Event) -> None:
    """Once the initial lists are in, what is held then (modules, Kopf, the cache's nodes and pods, most
    of it for good) is frozen out of the garbage collector's reach, so a full collection walks only what
    came after: at 1000 nodes and 10,000 running pods one took 109 ms of CPU, after the freeze about 0
    (gc.collect() timed on bench.decide_micro's cycle_burst heap). Frozen objects are still freed when no
    longer referenced; only reference cycles among them would be kept. Then full collections are made
    rarer (`FULL_COLLECTION_EVERY`); the young generations, where most cycles die, are collected as
    often as before."""
    await synced.wait()
    settle_collector()


async def warm_when_synced(synced: asyncio.Event, client: KubeClient) -> None:
    """Once the initial lists are in, `WARM_CONNECTIONS` pooled for the bindings to come; a failure
    only leaves them to be opened as needed."""
    await synced.wait()
    try:
        await client.warm(WARM_CONNECTIONS)
    except (ApiError, aiohttp.ClientError, TimeoutError) as error:
        logger.debug("Warming the API server connections failed: %s", error)


def settle_collector() -> None:
    """Collect, freeze what is held, and make full collections rarer."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)


@kopf.on.cleanup()
async def cleanup(memo: Memo, **_: Any) -> None:
    await _stop(memo.runtime)


async def _stop(runtime: Runtime) -> None:
    # The loop and its tasks, the Lease (released as its task ends) and the policies' refreshes stop
    # first; then the scheduler writes its last events, with the client still open.
    await runtime.scheduler.supervisor.close()
    await runtime.scheduler.close()
    if runtime.site is not None:
        await runtime.site.cleanup()
    await runtime.client.close()


def _kind(event: kopf.RawEvent) -> str:
    # Objects of the initial listing come with no type: they are additions.
    return str(event.get("type") or "ADDED")


@kopf.on.event(GROUP, VERSION, PLURAL)
async def policy_event(event: kopf.RawEvent, memo: Memo, **_: Any) -> None:
    await memo.runtime.scheduler.on_policy(_kind(event), event["object"])


KindHandler = Callable[..., Awaitable[None]]


def follow(kind: Kind) -> KindHandler:
    """Registers Kopf's handler of `kind`'s events, which hands each to the intake. The cluster's kinds
    get the event type as Kopf gives it: None marks an object of Kopf's listing, which after a 410 Gone
    tells the intake to list the kind itself and learn what was deleted meanwhile."""

    async def kind_event(event: kopf.RawEvent, memo: Memo, **_: Any) -> None:
        memo.runtime.scheduler.intake.on_event(kind, event["type"], event["object"])

    kopf.on.event(kind.group, kind.version, kind.plural, id=f"{kind.plural}_event")(kind_event)
    return kind_event


HANDLERS: dict[Kind, KindHandler] = {kind: follow(kind) for kind in WATCHED}


# asyncio gives every TLS connection a 256 KiB read buffer, zero-filled and so resident from the start:
# with 32 bindings, the watches and status writes in flight that was a tenth of the operator's memory.
# Responses are read in 32 KiB pieces instead (64 connections to the API server: 19.6 MB -> 5.9 MB).
TLS_READ_BUFFER = 32 * 1024


def limit_tls_read_buffers() -> None:
    asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level != "DEBUG":
        # Kopf logs every handled watch event at INFO: thousands of lines a minute on a busy cluster.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)


def run(options: RunOptions) -> None:
    """Run the operator until interrupted. Raises StartupError (and CredentialsError) for what keeps
    it from starting."""
    limit_tls_read_buffers()
    credentials = discover(options.kubeconfig, options.context)
    listener = listening.bind(options.listen)
    client = KubeClient(credentials, limiter=TokenBucket(options.kube_api_qps, options.kube_api_burst))
    secrets = SecretCache(client)
    scheduler = Scheduler(
        client,
        read_secret=secrets.read,
        allowed_prometheus_hosts=options.allowed_prometheus_hosts,
        namespaces=frozenset(options.namespaces) or None,
        resync_interval=options.resync_interval,
        max_unschedulable_seconds=options.max_unschedulable_seconds,
        bind_timeout=options.bind_timeout,
        rebalance_evictions=options.rebalance_evictions,
        watcher=client,
        watch_inactivity_timeout=options.watch_inactivity_timeout,
    )
    memo = Memo(runtime=Runtime(options, credentials, client, scheduler, listener))
    try:
        # Pods of every namespace are watched even when scheduling is limited to some: their requests
        # occupy the same nodes, and leaving them out would overcommit.
        # On the loop the metrics worker paces its work by (`offloading.new_event_loop`), as kopf.run
        # would run it otherwise (asyncio.run's set-up and clean-up, a cancellation ending quietly).
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(kopf.operator(standalone=True, clusterwide=True, memo=memo))
    except asyncio.CancelledError:
        pass
    except Exception as error:
        # Kopf raises a failed startup handler's error wrapped in an ActivityError it does not export.
        if memo.runtime.failure is None:
            raise
        raise listening.StartupError(memo.runtime.failure) from error
    finally:
        listener.close()
