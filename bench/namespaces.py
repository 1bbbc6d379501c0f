"""A namespace of its own for each bench run: created once its default ServiceAccount exists, deleted
(pods first, no grace) and waited for before the next run."""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp

from promsched.kube.credentials import Credentials
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError, KubeClient
from promsched.sandbox.control_plane.clusters import SandboxError


async def create_namespace(credentials: Credentials, namespace: str) -> None:
    async with KubeClient(credentials) as client:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        await client.send(Request("POST", "/api/v1/namespaces", body))
        # The ServiceAccount admission plugin rejects pods until the namespace's default account exists.
        deadline = time.monotonic() + 60
        while True:
            try:
                await client.send(Request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default"))
                return
            except ApiError as error:
                if error.status != 404 or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)


async def delete_namespace(credentials: Credentials, namespace: str) -> None:
    """Delete the namespace's pods at once (no grace), then the namespace; return once it is gone.
    Deleting 10,000 pods in one request outlasts the API server's request timeout, which drops the
    connection: the namespace's deletion then removes the rest."""
    async with KubeClient(credentials, timeout=300) as client:
        with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
            await client.send(
                Request("DELETE", f"/api/v1/namespaces/{namespace}/pods", params={"gracePeriodSeconds": "0"})
            )
        with contextlib.suppress(ApiError):
            await client.send(Request("DELETE", f"/api/v1/namespaces/{namespace}"))
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                await client.send(Request("GET", f"/api/v1/namespaces/{namespace}"))
            except ApiError as error:
                if error.status == 404:
                    return
                raise
            except (aiohttp.ClientError, TimeoutError):
                pass  # the API server is busy deleting: ask again
            await asyncio.sleep(0.5)
        raise SandboxError(f"namespace {namespace} was not deleted within 600 s")
