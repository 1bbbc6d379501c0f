"""A pod template's first container, run with podman as a kubelet would start it: its image, command,
args, env, user, read-only root, capabilities and emptyDir volumes, and the ServiceAccount's token, CA and
namespace at the in-cluster path, with KUBERNETES_SERVICE_HOST/PORT naming the API server. The pod shares
the host's network (the sandbox's API server listens on 127.0.0.1), so its ports are the host's."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class PodIdentity:
    """What the kubelet gives the pod: its name (the container's hostname), the ServiceAccount's files,
    and the API server's address."""

    name: str
    service_account_files: Path  # holds token, ca.crt and namespace
    api_host: str
    api_port: int


def write_service_account_files(folder: Path, token: str, ca: bytes, namespace: str) -> Path:
    """The projected volume's files, readable by the container's non-root user (as the kubelet's 0644)."""
    folder.mkdir(mode=0o755)
    for name, content in (("token", token.encode()), ("ca.crt", ca), ("namespace", namespace.encode())):
        (folder / name).write_bytes(content)
        (folder / name).chmod(0o644)
    folder.chmod(0o755)
    return folder


def run_user(pod: dict[str, Any], container: dict[str, Any]) -> tuple[int, int | None]:
    """runAsUser/runAsGroup, the container's over the pod's; the kubelet refuses a pod that asks for
    runAsNonRoot without a non-zero numeric user, and so does this."""
    pod_context, own = pod.get("securityContext") or {}, container.get("securityContext") or {}
    merged = {**pod_context, **own}
    user = merged.get("runAsUser")
    assert isinstance(user, int), f"no numeric runAsUser to check runAsNonRoot against: {merged}"
    if merged.get("runAsNonRoot"):
        assert user != 0, "runAsNonRoot with runAsUser 0: the kubelet would not start this container"
    return user, merged.get("runAsGroup")


def podman_run_arguments(pod: dict[str, Any], image: str, identity: PodIdentity) -> list[str]:
    """`podman run` arguments (after `run`) for the pod's first container."""
    container = pod["containers"][0]
    context = container.get("securityContext") or {}
    user, group = run_user(pod, container)
    arguments = [
        "--detach",
        f"--name={identity.name}",
        f"--hostname={identity.name}",
        "--network=host",
        f"--user={user}:{group}" if group is not None else f"--user={user}",
    ]
    if context.get("readOnlyRootFilesystem"):
        # Only what the pod mounts is writable: podman's own tmpfs on /tmp, /run... are left out.
        arguments += ["--read-only", "--read-only-tmpfs=false"]
    if context.get("allowPrivilegeEscalation") is False:
        arguments.append("--security-opt=no-new-privileges")
    capabilities = context.get("capabilities") or {}
    arguments += [f"--cap-drop={name.lower()}" for name in capabilities.get("drop") or []]
    arguments += [f"--cap-add={name.lower()}" for name in capabilities.get("add") or []]
    if container.get("workingDir"):
        arguments.append(f"--workdir={container['workingDir']}")
    for variable in container.get("env") or []:
        assert "value" in variable, f"env {variable['name']}: only literal values are supported here"
        arguments.append(f"--env={variable['name']}={variable['value']}")
    arguments += [f"--env=KUBERNETES_SERVICE_HOST={identity.api_host}"]
    arguments += [f"--env=KUBERNETES_SERVICE_PORT={identity.api_port}"]
    volumes = {volume["name"]: volume for volume in pod.get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        assert "emptyDir" in volume, f"volume {mount['name']}: only emptyDir is supported here"
        # An emptyDir is writable by any user (the kubelet makes it 0777).
        arguments.append(f"--mount=type=tmpfs,destination={mount['mountPath']},tmpfs-mode=1777")
    if pod.get("automountServiceAccountToken", True):
        arguments.append(
            f"--mount=type=bind,source={identity.service_account_files},"
            f"destination={SERVICE_ACCOUNT_PATH},readonly=true"
        )
    if container.get("command"):
        arguments.append(f"--entrypoint={json.dumps(container['command'])}")
    return [*arguments, image, *(container.get("args") or [])]


def port_number(container: dict[str, Any], port: int | str) -> int:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    return int(next(p["containerPort"] for p in container.get("ports") or [] if p.get("name") == port))
