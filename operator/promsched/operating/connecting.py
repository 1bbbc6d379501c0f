"""A client for the cluster a command names, with its failures as InspectErrors the command prints."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from promsched.kube.configuring import discover
from promsched.kube.credentials import CredentialsError
from promsched.kube.sending import ApiError, KubeClient
from promsched.operating.inspections import InspectError


@contextlib.asynccontextmanager
async def connected(kubeconfig: Path | None, context: str | None = None) -> AsyncIterator[KubeClient]:
    """A client for the cluster of `kubeconfig` (or $KUBECONFIG, in-cluster, ~/.kube/config) and
    `context` (default: the current one); credential, API and connection failures become InspectErrors."""
    try:
        credentials = discover(kubeconfig, context)
    except CredentialsError as error:
        raise InspectError(str(error)) from None
    try:
        async with KubeClient(credentials) as client:
            yield client
    except CredentialsError as error:
        raise InspectError(str(error)) from None
    except ApiError as error:
        raise InspectError(f"the API server refused a request: {error}") from None
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        raise InspectError(f"cannot reach the API server at {credentials.server}: {error}") from None
