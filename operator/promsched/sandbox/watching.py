"""Following the sandbox's running pods: a list, then a watch from its resourceVersion, as client-go's
reflector does.

A watch that ends (the API server closes it after `timeoutSeconds`) or breaks is opened again from the
last resourceVersion seen (bookmarks keep it fresh); one the API server answers 410 Gone, whose
resourceVersion is too old to resume from, is replaced by a fresh list. Only Running pods are listed
and watched: a pod that stops matching the field selector arrives as DELETED.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any, Protocol

import aiohttp

from promsched.kube.credentials import Credentials
from promsched.kube.requests import Request, watch_objects
from promsched.kube.sending import ApiError, open_session, stream_lines

logger = logging.getLogger(__name__)

PODS_PATH = "/api/v1/pods"
SELECTOR = {"fieldSelector": "status.phase=Running"}
LIST_PAGE_SIZE = 500
# client-go's reflector asks for a watch of 5-10 minutes; any length works, this one is in between.
WATCH_SECONDS = 450
RETRY_SECONDS = 1.0


class WatchExpired(Exception):
    """The API server can no longer resume from the resourceVersion asked for (410 Gone)."""


class PodSink(Protocol):
    def observe(self, pod: Mapping[str, Any]) -> None: ...
    def forget(self, pod: Mapping[str, Any]) -> None: ...
    def retain(self, uids: Collection[str]) -> None: ...


class PodSource(Protocol):
    async def list_page(self, params: Mapping[str, str]) -> Mapping[str, Any]: ...
    def watch(self, params: Mapping[str, str]) -> AsyncIterator[Mapping[str, Any]]: ...


async def relist(source: PodSource, sink: PodSink) -> str:
    """List every running pod into `sink`, a page at a time (a page is all that is held at once), then
    drop the pods the list no longer holds; returns the list's resourceVersion."""
    listed: set[str] = set()
    token = ""
    while True:
        params = {**SELECTOR, "limit": str(LIST_PAGE_SIZE), **({"continue": token} if token else {})}
        page = await source.list_page(params)
        for pod in page.get("items") or []:
            listed.add(pod["metadata"]["uid"])
            sink.observe(pod)
        metadata = page.get("metadata") or {}
        token = metadata.get("continue") or ""
        if not token:
            sink.retain(listed)
            return str(metadata.get("resourceVersion", ""))


async def watch_once(source: PodSource, sink: PodSink, resource_version: str) -> str:
    """Apply one watch's events to `sink` until it ends; returns the last resourceVersion seen."""
    params = watch_objects(PODS_PATH, resource_version, SELECTOR, WATCH_SECONDS).params
    async for event in source.watch(params):
        kind, pod = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if pod.get("code") == 410:
                raise WatchExpired(pod.get("message", "410 Gone"))
            raise aiohttp.ClientPayloadError(f"watch error: {pod.get('message', pod)}")
        if kind in ("ADDED", "MODIFIED"):
            sink.observe(pod)
        elif kind == "DELETED":
            sink.forget(pod)
        resource_version = str((pod.get("metadata") or {}).get("resourceVersion") or resource_version)
    return resource_version


async def follow_pods(source: PodSource, sink: PodSink, retry_seconds: float = RETRY_SECONDS) -> None:
    """List, then watch, for as long as the task runs; failures are logged and retried."""
    resource_version: str | None = None
    while True:
        try:
            if resource_version is None:
                resource_version = await relist(source, sink)
                logger.info("listed the running pods at resourceVersion %s", resource_version)
            resource_version = await watch_once(source, sink, resource_version)
        except WatchExpired as error:
            logger.info("watch expired (%s); listing again", error)
            resource_version = None
        except ApiError as error:
            if error.status == 410:
                resource_version = None
                continue
            logger.warning("following pods: %s; again in %gs", error, retry_seconds)
            await asyncio.sleep(retry_seconds)
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            logger.warning("following pods: %s; again in %gs", error, retry_seconds)
            await asyncio.sleep(retry_seconds)


class ApiPodSource:
    """The API server's pods over one aiohttp session (promsched's credentials handling)."""

    def __init__(self, credentials: Credentials) -> None:
        # A watch is open for minutes: no total timeout. The API server ends it after WATCH_SECONDS, so
        # one silent for longer is a connection that died without a word (a stopped API server).
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=WATCH_SECONDS + 60)
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

    async def watch(self, params: Mapping[str, str]) -> AsyncIterator[Mapping[str, Any]]:
        async with self.session.get(PODS_PATH, params=dict(params)) as response:
            if response.status >= 300:
                text = await response.text()
                raise ApiError.from_response(Request("GET", PODS_PATH, params=params), response.status, text)
            async for line in stream_lines(response.content):
                yield json.loads(line)
