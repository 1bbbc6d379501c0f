import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from promsched.kube.credentials import Credentials
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError
from promsched.sandbox.watching import ApiPodSource, follow_pods, relist, watch_once
from support.objects import pod_object
from support.polling import eventually_async


class RecordingSink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def observe(self, pod: Mapping[str, Any]) -> None:
        self.calls.append(("observe", pod["metadata"]["name"]))

    def forget(self, pod: Mapping[str, Any]) -> None:
        self.calls.append(("forget", pod["metadata"]["name"]))

    def retain(self, uids: Collection[str]) -> None:
        self.calls.append(("retain", sorted(uids)))


def event(kind: str, name: str, version: str) -> dict[str, Any]:
    return {"type": kind, "object": pod_object(name, node_name="n1", version=version)}


def gone() -> dict[str, Any]:
    return {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}


class FakePodSource:
    """Answers lists from `pages` (by continue token) and each watch with the next of `watches`, a list
    of events or an exception to raise; the parameters of every call are recorded."""

    def __init__(
        self, pages: dict[str, dict[str, Any]], watches: list[list[dict[str, Any]] | Exception]
    ) -> None:
        self.pages = pages
        self.watches = watches
        self.lists: list[Mapping[str, str]] = []
        self.watched: list[Mapping[str, str]] = []

    async def list_page(self, params: Mapping[str, str]) -> Mapping[str, Any]:
        self.lists.append(params)
        return self.pages[params.get("continue", "")]

    async def watch(self, params: Mapping[str, str]) -> AsyncIterator[Mapping[str, Any]]:
        self.watched.append(params)
        if not self.watches:
            await asyncio.Event().wait()  # a watch open with nothing to say
        answer = self.watches.pop(0)
        if isinstance(answer, Exception):
            raise answer
        for item in answer:
            yield item


def pages(version: str = "10") -> dict[str, dict[str, Any]]:
    return {
        "": {"items": [pod_object("a", node_name="n1")], "metadata": {"continue": "next"}},
        "next": {"items": [pod_object("b", node_name="n1")], "metadata": {"resourceVersion": version}},
    }


async def test_a_list_follows_its_pages_of_running_pods_and_drops_what_it_no_longer_holds() -> None:
    source, sink = FakePodSource(pages(), []), RecordingSink()
    assert await relist(source, sink) == "10"
    assert sink.calls == [("observe", "a"), ("observe", "b"), ("retain", ["uid-a", "uid-b"])]
    assert source.lists[0]["fieldSelector"] == "status.phase=Running"
    assert source.lists[1]["continue"] == "next"


async def test_watch_events_reach_the_sink_and_bookmarks_advance_the_resource_version() -> None:
    events = [
        event("ADDED", "c", "11"),
        event("MODIFIED", "c", "12"),
        event("DELETED", "a", "13"),
        {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "20"}}},
    ]
    source, sink = FakePodSource({}, [events]), RecordingSink()
    assert await watch_once(source, sink, "10") == "20"
    assert sink.calls == [("observe", "c"), ("observe", "c"), ("forget", "a")]
    assert source.watched[0]["resourceVersion"] == "10"
    assert source.watched[0]["allowWatchBookmarks"] == "true"


async def test_an_ended_watch_resumes_an_expired_one_lists_again_and_a_broken_one_retries() -> None:
    watches: list[list[dict[str, Any]] | Exception] = [
        [event("ADDED", "c", "11")],  # ends: resumed from 11
        aiohttp.ClientConnectionError("reset"),  # broken: retried from 11
        [gone()],  # expired: a fresh list
    ]
    source, sink = FakePodSource(pages("30"), watches), RecordingSink()
    task = asyncio.create_task(follow_pods(source, sink, retry_seconds=0.0))
    try:
        await eventually_async(lambda: len(source.watched) == 4, what="four watches")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert [params["resourceVersion"] for params in source.watched] == ["30", "11", "11", "30"]
    listed = [("observe", "a"), ("observe", "b"), ("retain", ["uid-a", "uid-b"])]
    assert sink.calls == [*listed, ("observe", "c"), *listed]


@pytest.mark.parametrize("status", [500, 403])
async def test_an_api_error_is_retried_without_a_new_list(status: int) -> None:
    failure = ApiError(Request("GET", "/api/v1/pods"), status, "Failed", "no")
    source, sink = FakePodSource(pages(), [failure]), RecordingSink()
    task = asyncio.create_task(follow_pods(source, sink, retry_seconds=0.0))
    try:
        await eventually_async(lambda: len(source.watched) == 2, what="two watches")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert len(source.lists) == 2  # the two pages of the first list only


async def test_the_api_source_reads_a_watch_stream_line_by_line_however_it_is_cut() -> None:
    lines = [json.dumps(event("ADDED", f"pod-{index}", str(index))).encode() + b"\n" for index in range(3)]
    stream = b"".join(lines)

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "1":
            return web.json_response({"items": [], "metadata": {"resourceVersion": "7"}})
        response = web.StreamResponse()
        await response.prepare(request)
        for start in range(0, len(stream), 100):  # events cut anywhere, as the network may cut them
            await response.write(stream[start : start + 100])
        return response

    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    async with TestServer(app) as server:
        source = ApiPodSource(Credentials(server=str(server.make_url("")), source="test"))
        try:
            sink = RecordingSink()
            version = await relist(source, sink)
            assert await watch_once(source, sink, version) == "2"
        finally:
            await source.close()
    assert sink.calls == [("retain", []), ("observe", "pod-0"), ("observe", "pod-1"), ("observe", "pod-2")]
