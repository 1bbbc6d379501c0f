"""What the benchmark and the null binder share: a raw watch over aiohttp, and a process's CPU and RSS.

Writes go through promsched's own client (`KubeClient`); a watch is a long streamed response, which that
client does not do, so it gets a session of its own built from the same credentials.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp

from bench.requestcounts import Counts, Reading, parse_reading
from promsched.kube.credentials import Credentials
from promsched.kube.sending import open_session

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def watch_session(credentials: Credentials) -> aiohttp.ClientSession:
    """A session for watches: no total timeout, large lines allowed."""
    return open_session(
        credentials,
        base_url=credentials.server,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        connections=8,
        headers={"Accept": "application/json"},
        read_bufsize=2**20,
    )


async def watch(
    session: aiohttp.ClientSession,
    path: str,
    params: Mapping[str, str],
    connected: asyncio.Event | None = None,
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(type, object) of every event of one watch request, until the server ends it; `connected` is set
    once the API server has answered (it sends the headers as soon as the watch is registered)."""
    query = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "3600", **params}
    async with session.get(path, params=query) as response:
        if response.status != 200:
            raise RuntimeError(f"watch {path}: {response.status} {(await response.text())[:300]}")
        if connected is not None:
            connected.set()
        async for line in response.content:
            if not line.strip():
                continue
            event = json.loads(line)
            kind = event.get("type", "")
            if kind == "ERROR":
                raise RuntimeError(f"watch {path}: {event.get('object')}")
            if kind != "BOOKMARK":
                yield kind, event["object"]


async def read_requests(session: aiohttp.ClientSession) -> Reading:
    """The API server's own count of the requests it served so far and the time it spent on them, by
    verb and resource (its /metrics, read with the sandbox's admin credentials)."""
    async with session.get("/metrics", headers={"Accept": "text/plain"}) as response:
        if response.status != 200:
            raise RuntimeError(f"/metrics: {response.status} {(await response.text())[:300]}")
        return parse_reading(await response.text())


async def read_counts(session: aiohttp.ClientSession) -> Counts:
    """The API server's own count of the requests it served so far, by verb and resource."""
    return (await read_requests(session)).totals


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return 0.0
