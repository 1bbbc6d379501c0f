"""Leader election on a fake API server that keeps the Lease as the real one does (resourceVersion
preconditions, 409 on a stale write). The lease is the only guard against two replicas binding pods:
at most one may lead at any moment, and a leader that cannot renew steps down before anyone may take
over."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from promsched.kube import requests
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError
from promsched.operating.leasing import LeaseElector
from support.clocks import Clock
from support.fake_apis import FakeApiServer
from support.polling import eventually_async

NAMESPACE, NAME = "promsched", "promsched"
LEASE = requests.lease_path(NAMESPACE, NAME)
EARLIER = "2026-01-01T00:00:00.000000Z"


def lease_spec(server: FakeApiServer) -> dict[str, Any]:
    spec: dict[str, Any] = server.objects[LEASE]["spec"]
    return spec


def hold(server: FakeApiServer, holder: str, **spec: Any) -> None:
    """Another replica writes the lease as its holder."""
    fields = {
        "holderIdentity": holder,
        "leaseDurationSeconds": 10,
        "acquireTime": EARLIER,
        "renewTime": EARLIER,
        "leaseTransitions": 0,
        **spec,
    }
    server.store(LEASE, {"metadata": {"name": NAME, "namespace": NAMESPACE}, "spec": fields})


def writes(server: FakeApiServer) -> list[str]:
    return [request.method for request in server.sent if request.method != "GET"]


class Replica:
    """One replica's elector, its view of the API (which a test may cut off) and what it was told."""

    def __init__(self, server: FakeApiServer, identity: str, clock: Clock, **options: Any) -> None:
        self.server, self.cut, self.attempts = server, False, 0
        self.changes: list[bool] = []
        self.elector = LeaseElector(
            self, NAMESPACE, NAME, identity, self.changes.append, clock=clock, retry_seconds=0, **options
        )

    async def send(self, request: Request) -> Any:
        if request.method == "GET":
            self.attempts += 1
        if self.cut:
            raise aiohttp.ClientConnectionError("the API server is unreachable")
        return await self.server.send(request)

    async def tries(self, count: int) -> None:
        """Let this replica's loop make `count` more attempts."""
        target = self.attempts + count
        await eventually_async(lambda: self.attempts >= target, what=f"{count} more lease attempts")


@pytest.fixture
def server() -> FakeApiServer:
    return FakeApiServer()


@pytest.fixture
def me(server: FakeApiServer, clock: Clock) -> Replica:
    return Replica(server, "me", clock)


@contextlib.asynccontextmanager
async def running(*replicas: Replica) -> AsyncIterator[None]:
    """The replicas' election loops, stopped (as at shutdown) on leaving."""
    tasks = [asyncio.create_task(replica.elector.run()) for replica in replicas]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# ----- one attempt ---------------------------------------------------------------------------------


async def test_an_absent_lease_is_created_with_this_replica_as_holder(
    server: FakeApiServer, me: Replica
) -> None:
    assert await me.elector.try_acquire_or_renew() is True
    assert writes(server) == ["POST"]
    spec = lease_spec(server)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("me", 10, 0)
    assert spec["acquireTime"] == spec["renewTime"]


async def test_the_holder_renews_with_the_version_it_read_and_keeps_its_acquire_time(
    server: FakeApiServer, me: Replica, clock: Clock
) -> None:
    await me.elector.try_acquire_or_renew()
    created = server.objects[LEASE]
    clock.advance(5.0)
    assert await me.elector.try_acquire_or_renew() is True
    put = server.sent[-1]
    assert (put.method, put.body["metadata"]["resourceVersion"]) == (
        "PUT",
        created["metadata"]["resourceVersion"],
    )
    spec = lease_spec(server)
    assert spec["acquireTime"] == created["spec"]["acquireTime"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("me", 0)


async def test_a_lease_another_replica_holds_is_left_alone_until_it_expires(
    server: FakeApiServer, me: Replica, clock: Clock
) -> None:
    hold(server, "other")
    assert await me.elector.try_acquire_or_renew() is False
    clock.advance(10.0)  # exactly the lease duration: not expired yet
    assert await me.elector.try_acquire_or_renew() is False
    assert writes(server) == []
    assert lease_spec(server)["holderIdentity"] == "other"


async def test_an_expired_lease_is_taken_over_and_counts_a_transition(
    server: FakeApiServer, me: Replica, clock: Clock
) -> None:
    hold(server, "other", leaseTransitions=2)
    assert await me.elector.try_acquire_or_renew() is False
    clock.advance(10.5)
    assert await me.elector.try_acquire_or_renew() is True
    spec = lease_spec(server)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("me", 3)
    assert spec["acquireTime"] != EARLIER


async def test_a_holder_that_keeps_renewing_keeps_the_lease(
    server: FakeApiServer, me: Replica, clock: Clock
) -> None:
    hold(server, "other")
    assert await me.elector.try_acquire_or_renew() is False
    for _ in range(3):
        clock.advance(8.0)
        hold(server, "other")  # renewed: a new resourceVersion
        assert await me.elector.try_acquire_or_renew() is False
    clock.advance(8.0)  # 32 s since first seen, 8 s since the last renewal
    assert await me.elector.try_acquire_or_renew() is False
    assert writes(server) == []


async def test_expiry_is_judged_by_this_replicas_clock_not_the_holders_timestamps(
    server: FakeApiServer, me: Replica
) -> None:
    # The holder's clock may be far behind; its renewTime says nothing to this replica.
    hold(server, "other", renewTime="2000-01-01T00:00:00.000000Z")
    assert await me.elector.try_acquire_or_renew() is False


async def test_the_duration_the_holder_wrote_is_the_one_that_counts(
    server: FakeApiServer, me: Replica, clock: Clock
) -> None:
    hold(server, "other", leaseDurationSeconds=30)
    assert await me.elector.try_acquire_or_renew() is False
    clock.advance(20.0)
    assert await me.elector.try_acquire_or_renew() is False
    clock.advance(10.5)
    assert await me.elector.try_acquire_or_renew() is True


class RivalWritesFirst(FakeApiServer):
    """Another replica writes the lease between this replica's read and its write."""

    def answer(self, request: Request) -> Any:
        if request.method in ("POST", "PUT"):
            hold(self, "rival")
        return super().answer(request)


@pytest.mark.parametrize("lease_before", [None, "other"], ids=["create", "takeover"])
async def test_a_write_that_loses_a_race_fails_with_409_and_overwrites_nothing(
    lease_before: str | None, clock: Clock
) -> None:
    server = RivalWritesFirst()
    if lease_before:
        hold(server, lease_before)
    me = Replica(server, "me", clock)
    if lease_before:
        assert await me.elector.try_acquire_or_renew() is False
        clock.advance(10.5)
    with pytest.raises(ApiError) as raised:
        await me.elector.try_acquire_or_renew()
    assert raised.value.status == 409
    assert lease_spec(server)["holderIdentity"] == "rival"


async def test_an_api_error_reading_the_lease_is_raised(server: FakeApiServer, me: Replica) -> None:
    server.fail[LEASE] = 500
    with pytest.raises(ApiError) as raised:
        await me.elector.try_acquire_or_renew()
    assert raised.value.status == 500
    assert writes(server) == []


# ----- the loop ------------------------------------------------------------------------------------


async def test_leadership_is_reported_once_per_change(
    server: FakeApiServer, me: Replica, clock: Clock
) -> None:
    async with running(me):
        await eventually_async(lambda: me.changes == [True], what="leadership")
        await me.tries(5)  # renewals: no news
        assert me.changes == [True]
        hold(server, "other")  # taken from under it (as a broken replica might)
        await me.tries(3)
        assert me.changes == [True]  # its own renewal is recent: the lease cannot have expired for others
        clock.advance(7.5)  # past lease_seconds - renew_margin without a renewal
        await eventually_async(lambda: me.changes == [True, False], what="stepping down")
        assert not me.elector.leading


async def test_a_leader_that_cannot_renew_steps_down_before_the_lease_can_expire(
    server: FakeApiServer, me: Replica, clock: Clock
) -> None:
    async with running(me):
        await eventually_async(lambda: me.elector.leading, what="leadership")
        server.fail[LEASE] = 500
        clock.advance(6.9)
        await me.tries(3)
        assert me.changes == [True]
        clock.advance(0.2)  # 7.1 s since the last renewal; a standby may take over after 10
        await eventually_async(lambda: me.changes == [True, False], what="stepping down")


async def test_only_unexpected_errors_are_logged(
    server: FakeApiServer, me: Replica, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="promsched.operating.leasing")
    async with running(me):
        server.fail[LEASE] = 409  # another replica wrote first: retried quietly
        await me.tries(3)
        assert caplog.records == []
        server.fail[LEASE] = 500
        await me.tries(1)
        me.cut = True
        await me.tries(1)
        await eventually_async(lambda: len(caplog.records) >= 2, what="two warnings")
    messages = [record.getMessage() for record in caplog.records]
    assert any("500 InternalError: refused" in message for message in messages)
    assert any("the API server is unreachable" in message for message in messages)
    assert me.changes == []


async def test_two_replicas_never_lead_at_once(server: FakeApiServer, clock: Clock) -> None:
    first, second = Replica(server, "first", clock), Replica(server, "second", clock)
    both: list[float] = []

    def watch(replica: Replica, other: Replica) -> None:
        def changed(leading: bool) -> None:
            replica.changes.append(leading)
            if leading and other.elector.leading:
                both.append(clock.now)

        replica.elector.on_change = changed

    watch(first, second)
    watch(second, first)
    async with running(first):
        await eventually_async(lambda: first.elector.leading, what="the first replica leading")
        async with running(second):
            await second.tries(3)
            first.cut = True  # partitioned: it can neither renew nor release
            for _ in range(15):
                clock.advance(1.0)
                await first.tries(2)
                await second.tries(2)
            first.cut = False
            await first.tries(3)
            assert (first.changes, second.changes) == ([True, False], [True])
        # The second hands the lease over as it stops; the first takes it at once.
        await eventually_async(lambda: first.elector.leading, what="the first replica leading again")
    assert both == []


async def test_shutdown_releases_the_lease_so_a_standby_takes_over_at_once(
    server: FakeApiServer, me: Replica, clock: Clock
) -> None:
    async with running(me):
        await eventually_async(lambda: me.elector.leading, what="leadership")
    assert me.changes == [True, False]
    spec = lease_spec(server)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)
    standby = Replica(server, "standby", clock)
    assert await standby.elector.try_acquire_or_renew() is True


async def test_shutdown_leaves_a_lease_another_replica_holds(server: FakeApiServer, me: Replica) -> None:
    async with running(me):
        await eventually_async(lambda: me.elector.leading, what="leadership")
        hold(server, "other")
        written = len(writes(server))
    assert writes(server)[written:] == []
    assert lease_spec(server)["holderIdentity"] == "other"
    assert me.changes == [True, False]


async def test_a_replica_that_never_led_releases_nothing(server: FakeApiServer, me: Replica) -> None:
    await me.elector.release()
    assert server.sent == []
    assert me.changes == []
