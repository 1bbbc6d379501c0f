"""The client-side rate limit (kube-scheduler's --kube-api-qps and --kube-api-burst): client-go's token
bucket on a hand-moved clock, and bindings served before the writes that waited longer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from promsched.kube import requests
from promsched.kube.credentials import Credentials, FixedToken
from promsched.kube.sending import KubeClient
from promsched.kube.throttling import TokenBucket
from promsched.scheduling.reporting.eventing import EventRecorder, PodRef
from support.clocks import Clock
from support.polling import eventually_async


class Waits:
    """The bucket's sleep: moves the clock on instead of waiting, and records how long each wait was.
    While `gate` is clear, waits hold, so a test can line up waiters before any token is handed out."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.seconds: list[float] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.before_next: Callable[[], object] | None = None  # called as the next wait starts

    async def __call__(self, seconds: float) -> None:
        if self.before_next is not None:
            self.before_next()
            self.before_next = None
        await self.gate.wait()
        self.seconds.append(seconds)
        self.clock.advance(seconds)
        await asyncio.sleep(0)


def bucket_on(clock: Clock, qps: float, burst: int) -> tuple[TokenBucket, Waits]:
    waits = Waits(clock)
    return TokenBucket(qps, burst, clock=clock, sleep=waits), waits


async def test_a_burst_goes_at_once_then_one_request_per_1_over_qps(clock: Clock) -> None:
    bucket, waits = bucket_on(clock, qps=50, burst=100)  # kube-scheduler's defaults
    for _ in range(100):
        await bucket.take()
    assert waits.seconds == [], "the first `burst` requests wait for nothing"
    for _ in range(3):
        await bucket.take()
    assert waits.seconds == pytest.approx([0.02, 0.02, 0.02])
    assert clock.now == pytest.approx(1000.06)


async def test_an_idle_bucket_refills_up_to_burst_only(clock: Clock) -> None:
    bucket, waits = bucket_on(clock, qps=50, burst=100)
    for _ in range(100):
        await bucket.take()
    clock.advance(60.0)  # room for 3000 tokens, but the bucket holds 100
    for _ in range(100):
        await bucket.take()
    assert waits.seconds == []
    await bucket.take()
    assert waits.seconds == pytest.approx([0.02])


async def test_a_waiting_binding_is_served_before_writes_that_waited_longer(clock: Clock) -> None:
    bucket, waits = bucket_on(clock, qps=10, burst=1)
    await bucket.take()  # the bucket is empty now
    waits.gate.clear()
    served: list[str] = []

    async def take(name: str, priority: requests.Priority) -> None:
        await bucket.take(priority)
        served.append(name)

    writes = [
        asyncio.create_task(take(name, requests.Priority.NORMAL)) for name in ("event", "condition", "status")
    ]
    await eventually_async(lambda: bucket.waiting == 3, what="three writes waiting")
    binding = asyncio.create_task(take("binding", requests.Priority.HIGH))
    await eventually_async(lambda: bucket.waiting == 4, what="the binding waiting too")
    waits.gate.set()
    await asyncio.gather(*writes, binding)

    assert served == ["binding", "event", "condition", "status"]
    assert waits.seconds == pytest.approx([0.1] * 4), "still one token per 1/qps"


async def test_a_cancelled_waiter_leaves_its_place_and_takes_no_token(clock: Clock) -> None:
    bucket, waits = bucket_on(clock, qps=10, burst=1)
    await bucket.take()
    waits.gate.clear()
    first = asyncio.create_task(bucket.take())
    second = asyncio.create_task(bucket.take())
    await eventually_async(lambda: bucket.waiting == 2, what="two waiters")
    first.cancel()
    waits.gate.set()
    await second
    assert first.cancelled()
    assert waits.seconds == pytest.approx([0.1]), "the second waited for one token, not two"


async def test_a_token_handed_to_a_waiter_cancelled_before_it_ran_goes_back(clock: Clock) -> None:
    bucket, waits = bucket_on(clock, qps=10, burst=2)
    await bucket.take()
    await bucket.take()
    waits.gate.clear()
    first = asyncio.create_task(bucket.take())
    second = asyncio.create_task(bucket.take())
    await eventually_async(lambda: bucket.waiting == 2, what="two waiters")
    # The dispenser is in its wait for the first token. Its next wait starts right after it handed that
    # token over, before the first waiter ran again: cancelled then, the first never uses its token.
    waits.before_next = first.cancel
    waits.gate.set()
    await second
    assert first.cancelled()
    await bucket.take()
    assert waits.seconds == pytest.approx([0.1, 0.1]), "the last take used the token the first gave back"


async def test_closing_fails_the_requests_still_waiting(clock: Clock) -> None:
    bucket, waits = bucket_on(clock, qps=10, burst=1)
    await bucket.take()
    waits.gate.clear()
    waiter = asyncio.create_task(bucket.take())
    await eventually_async(lambda: bucket.waiting == 1, what="a waiter")
    await bucket.close()
    with pytest.raises(RuntimeError, match="closed while this request waited"):
        await waiter


@pytest.mark.parametrize(
    ("qps", "burst"), [(0, 100), (-1, 100), (float("nan"), 100), (float("inf"), 100), (50, 0)]
)
def test_a_bucket_that_could_never_serve_is_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="qps > 0 and burst >= 1"):
        TokenBucket(qps, burst)


# ----- through the client ---------------------------------------------------------------------------------


async def test_a_binding_waiting_for_a_token_reaches_the_api_server_before_waiting_writes(
    clock: Clock, aiohttp_server: AiohttpServer
) -> None:
    arrived: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        arrived.append(f"{request.method} {request.path}")
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handle)
    server = await aiohttp_server(app)
    bucket, waits = bucket_on(clock, qps=5, burst=1)
    credentials = Credentials(str(server.make_url("")), "a test", token=FixedToken("t", "a token"))
    pod = PodRef("shop", "web-0", "uid-0")
    event = EventRecorder("promsched", instance="a").record(
        pod, "Warning", "FailedScheduling", "Scheduling", "0/3"
    )
    assert event is not None
    writes = [
        event,
        requests.patch_pod_condition("shop", "web-0", {"type": "PodScheduled", "status": "False"}),
        requests.patch_policy_status("load-aware", {"scheduled": 1}),
    ]
    binding = requests.bind_pod("shop", "web-1", "uid-1", "node-1", {})
    async with KubeClient(credentials, limiter=bucket) as client:
        await client.send(requests.get_secret("shop", "first"))  # takes the only token
        waits.gate.clear()
        sending = [asyncio.create_task(client.send(write)) for write in writes]
        await eventually_async(lambda: bucket.waiting == 3, what="the writes waiting for tokens")
        sending.append(asyncio.create_task(client.send(binding)))
        await eventually_async(lambda: bucket.waiting == 4, what="the binding waiting too")
        waits.gate.set()
        await asyncio.gather(*sending)

    assert arrived == [
        "GET /api/v1/namespaces/shop/secrets/first",
        "POST /api/v1/namespaces/shop/pods/web-1/binding",
        "POST /apis/events.k8s.io/v1/namespaces/shop/events",
        "PATCH /api/v1/namespaces/shop/pods/web-0/status",
        "PATCH /apis/promsched.io/v1alpha1/schedulingpolicies/load-aware/status",
    ]
