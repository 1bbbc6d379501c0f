import asyncio
import contextlib
import json
from collections.abc import Collection, Mapping
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from promsched.kube.credentials import Credentials
from promsched.kube.requests import Request, watch_objects
from promsched.kube.sending import ApiError
from promsched.sandbox.node_metrics.watching import ApiPodSource, follow_pods, relist
from support.objects import pod_object
from support.polling import eventually_async
from support.watchers import Event, ScriptedWatcher, follow_until


class RecordingSink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def observe(self, pod: Mapping[str, Any]) -> None:
        self.calls.append(("observe", pod["metadata"]["name"]))

    def forget(self, pod: Mapping[str, Any]) -> None:
        self.calls.append(("forget", pod["metadata"]["name"]))

    def retain(self, uids: Collection[str]) -> None:
        self.calls.append(("retain", sorted(uids)))


def event(kind: str, name: str, version: str) -> Event:
    return (kind, pod_object(name, node_name="n1", version=version))


def gone() -> ApiError:
    """What a watch raises for the API server's ERROR event with a 410 Status."""
    return ApiError(Request("GET", "/api/v1/pods"), 410, "Expired", "too old resource version")


class FakePodSource(ScriptedWatcher):
    """Answers lists from `pages` (by continue token) and each watch with the next script (see
    `ScriptedWatcher`); the parameters of every list and watch are recorded."""

    def __init__(self, pages: dict[str, dict[str, Any]], *scripts: tuple[list[Event], BaseException | None]):
        super().__init__(*scripts)
        self.pages = pages
        self.lists: list[Mapping[str, str]] = []

    async def list_page(self, params: Mapping[str, str]) -> Mapping[str, Any]:
        self.lists.append(params)
        return self.pages[params.get("continue", "")]

    @property
    def watched(self) -> list[Mapping[str, str]]:
        return [request.params for request in self.requests]


async def follow(source: FakePodSource, sink: RecordingSink, watches: int) -> list[float]:
    """Run `follow_pods` until it has opened `watches` watches; the pauses it took."""
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    await follow_until(follow_pods(source, sink, retry_seconds=0.5, sleep=sleep), source, watches)
    return sleeps


def pages(version: str = "10") -> dict[str, dict[str, Any]]:
    return {
        "": {"items": [pod_object("a", node_name="n1")], "metadata": {"continue": "next"}},
        "next": {"items": [pod_object("b", node_name="n1")], "metadata": {"resourceVersion": version}},
    }


async def test_a_list_follows_its_pages_of_running_pods_and_drops_what_it_no_longer_holds() -> None:
    source, sink = FakePodSource(pages()), RecordingSink()
    assert await relist(source, sink) == "10"
    assert sink.calls == [("observe", "a"), ("observe", "b"), ("retain", ["uid-a", "uid-b"])]
    assert source.lists[0]["fieldSelector"] == "status.phase=Running"
    assert source.lists[1]["continue"] == "next"


async def test_watch_events_reach_the_sink_and_bookmarks_advance_the_resource_version() -> None:
    events = [
        event("ADDED", "c", "11"),
        event("MODIFIED", "c", "12"),
        event("DELETED", "a", "13"),
        ("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "20"}}),
    ]
    source, sink = FakePodSource(pages("10"), (events, None)), RecordingSink()
    await follow(source, sink, 2)
    assert source.watched[1]["resourceVersion"] == "20"  # resumed from the bookmark's version
    listed = [("observe", "a"), ("observe", "b"), ("retain", ["uid-a", "uid-b"])]
    assert sink.calls == [*listed, ("observe", "c"), ("observe", "c"), ("forget", "a")]
    assert source.watched[0]["resourceVersion"] == "10"
    assert source.watched[0]["allowWatchBookmarks"] == "true"
    assert source.watched[0]["fieldSelector"] == "status.phase=Running"


async def test_an_ended_watch_resumes_an_expired_one_lists_again_and_a_broken_one_retries() -> None:
    source = FakePodSource(
        pages("30"),
        ([event("ADDED", "c", "11")], None),  # ends: resumed from 11
        ([], aiohttp.ClientConnectionError("reset")),  # broken: retried from 11
        ([], gone()),  # expired: a fresh list
    )
    sink = RecordingSink()
    sleeps = await follow(source, sink, 4)
    assert sleeps == [0.5]  # after the broken watch only
    assert [params["resourceVersion"] for params in source.watched] == ["30", "11", "11", "30"]
    listed = [("observe", "a"), ("observe", "b"), ("retain", ["uid-a", "uid-b"])]
    assert sink.calls == [*listed, ("observe", "c"), *listed]


@pytest.mark.parametrize("status", [500, 403])
async def test_an_api_error_is_retried_without_a_new_list(status: int) -> None:
    failure = ApiError(Request("GET", "/api/v1/pods"), status, "Failed", "no")
    source, sink = FakePodSource(pages(), ([], failure)), RecordingSink()
    sleeps = await follow(source, sink, 2)
    assert sleeps == [0.5]
    assert len(source.lists) == 2  # the two pages of the first list only


def wire(kind: str, obj: Mapping[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def api_server(watches: dict[str, bytes], asked: list[str]) -> TestServer:
    """An API server whose pod list is empty at resourceVersion 7 and whose watch from a version
    streams `watches[version]` cut into 100-byte pieces (as the network may cut it); `asked` records
    the version of every watch."""

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "1":
            return web.json_response({"items": [], "metadata": {"resourceVersion": "7"}})
        version = request.query.get("resourceVersion", "")
        asked.append(version)
        stream = watches[version]
        response = web.StreamResponse()
        await response.prepare(request)
        for start in range(0, len(stream), 100):
            await response.write(stream[start : start + 100])
        return response

    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    return TestServer(app)


def status_event(code: int) -> bytes:
    return wire("ERROR", {"kind": "Status", "code": code, "reason": "Expired", "message": "too old"})


async def test_the_api_source_reads_a_watch_stream_line_by_line_however_it_is_cut() -> None:
    stream = b"".join(wire(*event("ADDED", f"pod-{index}", str(index))) for index in range(3))
    asked: list[str] = []
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:  # the pause after the resumed watch's error: held there
        sleeps.append(seconds)
        await asyncio.Event().wait()

    async with api_server({"7": stream, "2": status_event(500)}, asked) as server:
        source = ApiPodSource(Credentials(server=str(server.make_url("")), source="test"))
        sink = RecordingSink()
        task = asyncio.create_task(follow_pods(source, sink, sleep=sleep))
        try:
            await eventually_async(lambda: bool(sleeps), what="the resumed watch's error")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await source.close()
    assert asked == ["7", "2"]  # resumed from the last event's version
    assert sink.calls == [("retain", []), ("observe", "pod-0"), ("observe", "pod-1"), ("observe", "pod-2")]


async def test_the_api_source_raises_an_error_event_as_an_api_error_with_its_status_code() -> None:
    asked: list[str] = []
    async with api_server({"5": wire(*event("ADDED", "a", "6")) + status_event(410)}, asked) as server:
        source = ApiPodSource(Credentials(server=str(server.make_url("")), source="test"))
        seen: list[str] = []

        async def read() -> None:
            async for kind, _ in source.watch(watch_objects("/api/v1/pods", "5", {}, 60), 30.0):
                seen.append(kind)

        try:
            with pytest.raises(ApiError) as raised:
                await read()
        finally:
            await source.close()
    assert seen == ["ADDED"]
    assert raised.value.status == 410
    assert raised.value.reason == "Expired"
