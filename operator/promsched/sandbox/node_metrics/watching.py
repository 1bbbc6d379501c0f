"""Following the sandbox's running pods: a list, then a watch from its resourceVersion, resumed and
started anew as client-go's reflector does (`kube.reflecting`).

A watch that ends (the API server closes it after `timeoutSeconds`) or breaks is opened again from the
last resourceVersion seen (bookmarks keep it fresh); one the API server answers 410 Gone, whose
resourceVersion is too old to resume from, is replaced by a fresh list. Only Running pods are listed
and watched: a pod that stops matching the field selector arrives as DELETED.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any, NoReturn, Protocol

import aiohttp

from promsched.kube.credentials import Credentials
from promsched.kube.reflecting import RETRY_SECONDS, WATCH_SECONDS, Reflector, SupportsWatch
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError, open_session, watch_events

logger = logging.getLogger(__name__)

PODS_PATH = "/api/v1/pods"
RUNNING_PODS = "status.phase=Running"
LIST_PAGE_SIZE = 500
# The API server ends a watch after WATCH_SECONDS, so one silent for longer is a connection that died
# without a word (a stopped API server).
INACTIVITY_SECONDS = WATCH_SECONDS + 60


class PodSink(Protocol):
    def observe(self, pod: Mapping[str, Any]) -> None: ...
    def forget(self, pod: Mapping[str, Any]) -> None: ...
    def retain(self, uids: Collection[str]) -> None: ...


class PodSource(SupportsWatch, Protocol):
    async def list_page(self, params: Mapping[str, str]) -> Mapping[str, Any]: ...


async def relist(source: PodSource, sink: PodSink) -> str:
    """List every running pod into `sink`, a page at a time (a page is all that is held at once), then
    drop the pods the list no longer holds; returns the list's resourceVersion."""
    listed: set[str] = set()
    token = ""
    while True:
        params = {
            "fieldSelector": RUNNING_PODS,
            "limit": str(LIST_PAGE_SIZE),
            **({"continue": token} if token else {}),
        }
        page = await source.list_page(params)
        for pod in page.get("items") or []:
            listed.add(pod["metadata"]["uid"])
            sink.observe(pod)
        metadata = page.get("metadata") or {}
        token = metadata.get("continue") or ""
        if not token:
            sink.retain(listed)
            return str(metadata.get("resourceVersion", ""))


async def follow_pods(
    source: PodSource,
    sink: PodSink,
    retry_seconds: float = RETRY_SECONDS,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> NoReturn:
    """List, then watch, for as long as the task runs; failures are logged and retried."""

    def deliver(event_type: str, pod: Mapping[str, Any]) -> None:
        if event_type in ("ADDED", "MODIFIED"):
            sink.observe(pod)
        elif event_type == "DELETED":
            sink.forget(pod)

    async def listed() -> str:
        version = await relist(source, sink)
        logger.info("listed the running pods at resourceVersion %s", version)
        return version

    reflector = Reflector(
        source,
        PODS_PATH,
        RUNNING_PODS,
        deliver,
        listed,
        what="running pods",
        inactivity_timeout=INACTIVITY_SECONDS,
        retry_seconds=retry_seconds,
        sleep=sleep,
        logger=logger,
    )
    await reflector.follow(None)  # no version yet: a list first


class ApiPodSource:
    """The API server's pods over one aiohttp session (promsched's credentials handling)."""

    def __init__(self, credentials: Credentials) -> None:
        # A watch is open for minutes: no total timeout (each watch sets how long it may be silent).
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=15)
        self.session = open_session(credentials, base_url=credentials.server, timeout=timeout, connections=4)

    async def close(self) -> None:
        await self.session.close()

    async def list_page(self, params: Mapping[str, str]) -> Mapping[str, Any]:
        async with self.session.get(
            PODS_PATH, params=dict(params), timeout=aiohttp.ClientTimeout(60)
        ) as response:
            text = await response.text()
            if response.status >= 300:
                raise ApiError.from_response(Request("GET", PODS_PATH, params=params), response.status, text)
            page: Mapping[str, Any] = json.loads(text)
            return page

    async def watch(
        self, request: Request, inactivity_timeout: float
    ) -> AsyncIterator[tuple[str, Mapping[str, Any]]]:
        """`KubeClient.watch`'s events and errors, over this session."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=inactivity_timeout)
        async with self.session.get(request.path, params=dict(request.params), timeout=timeout) as response:
            async for event in watch_events(request, response):
                yield event
