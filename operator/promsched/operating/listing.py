"""Names read from the cluster for the command line: pods and policies to complete on a shell, and the
pods whose names are near one that does not exist."""

from __future__ import annotations

import difflib
from pathlib import Path

from promsched.api.policies import GROUP, PLURAL, VERSION
from promsched.kube.sending import ApiError, SupportsSend, list_all
from promsched.operating.connecting import connected

POLICIES_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"


async def pod_names(sender: SupportsSend, namespace: str) -> list[str]:
    return sorted(
        pod["metadata"]["name"] for pod in await list_all(sender, f"/api/v1/namespaces/{namespace}/pods")
    )


async def near_pods(sender: SupportsSend, namespace: str, name: str) -> list[str]:
    """The namespace's pods whose names are close to `name`, closest first; none when they cannot be read."""
    try:
        names = await pod_names(sender, namespace)
    except ApiError:
        return []
    return difflib.get_close_matches(name, names, n=3, cutoff=0.6)


async def complete_pods(
    kubeconfig: Path | None, context: str | None, namespace: str | None, prefix: str
) -> list[str]:
    """The pods of `namespace` (default: the context's) whose names start with `prefix`."""
    async with connected(kubeconfig, context) as client:
        names = await pod_names(client, namespace or client.credentials.default_namespace)
    return [name for name in names if name.startswith(prefix)]


async def complete_policies(kubeconfig: Path | None, context: str | None, prefix: str) -> list[str]:
    """The SchedulingPolicies (cluster-scoped) whose names start with `prefix`."""
    async with connected(kubeconfig, context) as client:
        names = sorted(policy["metadata"]["name"] for policy in await list_all(client, POLICIES_PATH))
    return [name for name in names if name.startswith(prefix)]
