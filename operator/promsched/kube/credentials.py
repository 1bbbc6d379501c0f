"""Where the API server is and how to authenticate: a kubeconfig file or the in-cluster ServiceAccount.

The same credentials serve Kopf's watches (handed over at login) and promsched's own writes, so there
is one place that reads them.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class CredentialsError(RuntimeError):
    """No usable credentials; the message says where promsched looked."""


@dataclass(frozen=True)
class Credentials:
    server: str
    ca_path: str | None = None
    certificate_path: str | None = None
    private_key_path: str | None = None
    token_path: str | None = None
    token: str | None = None
    insecure: bool = False
    default_namespace: str = "default"

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        context = ssl.create_default_context(cafile=self.ca_path)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.certificate_path:
            context.load_cert_chain(self.certificate_path, self.private_key_path)
        return context

    def bearer_token(self) -> str | None:
        """The token, re-read from its file each time: projected ServiceAccount tokens rotate."""
        if self.token_path:
            return Path(self.token_path).read_text().strip()
        return self.token


def _materialize(entry: dict[str, Any], key: str, base: Path) -> str | None:
    """A kubeconfig gives a file as `key` or inline as `key-data`; return a path either way."""
    if entry.get(key):
        path = Path(entry[key])
        return str(path if path.is_absolute() else base / path)
    data = entry.get(f"{key}-data")
    if not data:
        return None
    handle = tempfile.NamedTemporaryFile(prefix="promsched-", suffix=".pem", delete=False)  # noqa: SIM115
    with handle:
        handle.write(base64.b64decode(data))
    return handle.name


def from_kubeconfig(path: Path, context_name: str | None = None) -> Credentials:
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise CredentialsError(f"cannot read kubeconfig {path}: {error}") from None
    name = context_name or config.get("current-context")
    contexts = {c["name"]: c.get("context", {}) for c in config.get("contexts", [])}
    if name not in contexts:
        raise CredentialsError(f"kubeconfig {path}: context {name!r} not found (have {', '.join(contexts)})")
    context = contexts[name]
    clusters = {c["name"]: c.get("cluster", {}) for c in config.get("clusters", [])}
    users = {u["name"]: u.get("user", {}) for u in config.get("users", [])}
    cluster = clusters.get(context.get("cluster"), {})
    user = users.get(context.get("user"), {})
    if not cluster.get("server"):
        raise CredentialsError(f"kubeconfig {path}: cluster of context {name!r} has no server")
    base = path.parent
    return Credentials(
        server=cluster["server"].rstrip("/"),
        ca_path=_materialize(cluster, "certificate-authority", base),
        certificate_path=_materialize(user, "client-certificate", base),
        private_key_path=_materialize(user, "client-key", base),
        token_path=user.get("tokenFile"),
        token=user.get("token"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        default_namespace=context.get("namespace", "default"),
    )


def in_cluster() -> Credentials:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise CredentialsError("not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    host = f"[{host}]" if ":" in host else host
    namespace_file = SERVICE_ACCOUNT_DIR / "namespace"
    return Credentials(
        server=f"https://{host}:{port}",
        ca_path=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
        token_path=str(SERVICE_ACCOUNT_DIR / "token"),
        default_namespace=namespace_file.read_text().strip() if namespace_file.exists() else "default",
    )


def discover(kubeconfig: Path | None = None) -> Credentials:
    """`--kubeconfig`, else $KUBECONFIG, else in-cluster, else ~/.kube/config."""
    explicit = kubeconfig or (Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None)
    if explicit:
        return from_kubeconfig(explicit)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster()
    default = Path.home() / ".kube" / "config"
    if default.exists():
        return from_kubeconfig(default)
    raise CredentialsError("no credentials: pass --kubeconfig, set KUBECONFIG, or run in a cluster")
