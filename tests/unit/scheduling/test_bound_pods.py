"""Following bound pods on a watch of the intake's own: resumed where it stopped, started anew after 410
Gone with a list asked for, retried after errors (no cluster: a scripted watcher)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest

from promsched.kube.requests import Request
from promsched.kube.sending import ApiError
from promsched.scheduling.intake.bound_pods import BOUND_PODS, BoundPods
from support.objects import pod_object
from support.watchers import Event, ScriptedWatcher, follow_until


def bound(name: str, version: int) -> Mapping[str, Any]:
    return pod_object(name, node_name="n1", version=str(version))


def bookmark(version: int) -> Event:
    return ("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": str(version)}})


async def follow(watcher: ScriptedWatcher, watches: int) -> tuple[list[Event], int, list[float]]:
    """Run the follower from version 10 until it has opened `watches` watches; what it delivered, how
    many lists it asked for and the sleeps it took."""
    delivered: list[Event] = []
    relists = 0
    sleeps: list[float] = []

    def relist() -> None:
        nonlocal relists
        relists += 1

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    follower = BoundPods(
        watcher,
        lambda kind, obj: delivered.append((kind, obj)),
        relist,
        inactivity_timeout=70.0,
        sleep=sleep,
    )
    await follow_until(follower.follow("10"), watcher, watches)
    return delivered, relists, sleeps


async def test_events_are_delivered_and_a_watch_that_ends_resumes_from_the_last_version_seen() -> None:
    first = [("ADDED", bound("a", 11)), ("MODIFIED", bound("a", 12)), bookmark(15)]
    watcher = ScriptedWatcher((first, None), ([("DELETED", bound("a", 16))], None))
    delivered, relists, sleeps = await follow(watcher, 3)
    assert [(kind, obj["metadata"]["resourceVersion"]) for kind, obj in delivered] == [
        ("ADDED", "11"),
        ("MODIFIED", "12"),
        ("DELETED", "16"),
    ]  # the bookmark only moved the version on
    assert watcher.versions() == ["10", "15", "16"]
    assert relists == 0
    assert sleeps == []
    request = watcher.requests[0]
    assert request.path == "/api/v1/pods"
    assert (
        request.params["fieldSelector"]
        == BOUND_PODS
        == ("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed")
    )
    assert request.params["allowWatchBookmarks"] == "true"
    assert request.params["watch"] == "1"
    assert watcher.timeouts[0] == 70.0


async def test_an_expired_watch_asks_for_a_list_and_starts_from_the_current_state() -> None:
    expired = ApiError(Request("GET", "/api/v1/pods"), 410, "Expired", "too old resource version: 10")
    watcher = ScriptedWatcher(([("ADDED", bound("a", 11))], expired))
    delivered, relists, sleeps = await follow(watcher, 2)
    assert len(delivered) == 1
    assert relists == 1
    assert watcher.versions() == ["10", None]  # no resourceVersion: the current state first, as ADDED
    assert sleeps == []


@pytest.mark.parametrize(
    "error",
    [
        ApiError(Request("GET", "/api/v1/pods"), 500, "InternalError", "etcd is slow"),
        aiohttp.ClientConnectionError("reset by peer"),
        TimeoutError(),  # silent for longer than the inactivity timeout
    ],
    ids=["api-error", "connection", "silent"],
)
async def test_a_watch_that_fails_is_resumed_from_the_same_version_after_a_pause(error: Exception) -> None:
    watcher = ScriptedWatcher(([("ADDED", bound("a", 11))], error))
    _, relists, sleeps = await follow(watcher, 2)
    assert watcher.versions() == ["10", "11"]
    assert sleeps == [1.0]
    assert relists == 0
