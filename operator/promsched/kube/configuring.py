"""Finding the API server and its credentials, as kubectl does, with the `kubernetes` package's loader.

The order is kubectl's: `--kubeconfig`, else $KUBECONFIG (a list of files, merged: the first file to
name a cluster, user, context or current-context wins; missing and empty files are skipped), else the
pod's ServiceAccount in a cluster, else ~/.kube/config. The loader reads the files, resolves relative
paths and `--context`, and writes inline certificates to files for TLS to read (in a folder removed
at exit). Exec credential plugins and token files are left to `credentials`' token sources: the
loader would run a plugin once and log its failure instead of raising it, and read a token file once
although kubelet rotates it.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from kubernetes.client import Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.exec_provider import ExecProvider
from kubernetes.config.incluster_config import InClusterConfigLoader
from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader, KubeConfigMerger

from promsched.kube.credentials import (
    Credentials,
    CredentialsError,
    ExecStatus,
    ExecToken,
    FileToken,
    FixedToken,
    TokenSource,
)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# aiohttp tunnels through HTTP(S) proxies only; kubectl also speaks SOCKS5.
PROXY_SCHEMES = ("http", "https")
# What the loader raises on a malformed file: its own error, or whatever its code trips over.
_MALFORMED = (ConfigException, yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError)


@functools.cache
def temporary_directory() -> Path:
    """Where inline certificates and keys go, since Python's ssl reads them from files only; removed at
    exit (Kopf stops on SIGTERM by returning, so atexit runs in a pod too)."""
    directory = Path(tempfile.mkdtemp(prefix="promsched-credentials-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def kubeconfig_paths(variable: str) -> list[Path]:
    """$KUBECONFIG's files, in order (empty entries skipped, as kubectl does)."""
    return [Path(entry).expanduser() for entry in variable.split(os.pathsep) if entry]


def discover(
    kubeconfig: Path | None = None, context: str | None = None, environ: Mapping[str, str] = os.environ
) -> Credentials:
    """`--kubeconfig`, else $KUBECONFIG, else in-cluster (unless a context is asked for), else
    ~/.kube/config."""
    if kubeconfig is not None:
        return from_kubeconfig(kubeconfig, context)
    listed = kubeconfig_paths(environ.get("KUBECONFIG", ""))
    if listed:
        return from_kubeconfig(listed, context)
    if environ.get("KUBERNETES_SERVICE_HOST") and context is None:
        return in_cluster(environ=environ)
    default = Path.home() / ".kube" / "config"
    if default.exists():
        return from_kubeconfig(default, context)
    if context is not None:
        raise CredentialsError(
            f"--context {context}: no kubeconfig to find it in; pass --kubeconfig, set KUBECONFIG, "
            "or create ~/.kube/config"
        )
    raise CredentialsError("no credentials: pass --kubeconfig, set KUBECONFIG, or run in a cluster")


def from_kubeconfig(paths: Path | str | Sequence[Path], context: str | None = None) -> Credentials:
    """The credentials of `context` (default: the current one) in the merge of the kubeconfig files."""
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(path) for path in paths]
    where = os.pathsep.join(str(path) for path in files)
    existing = [path.expanduser() for path in files if path.expanduser().exists()]
    if not existing:
        raise CredentialsError(
            f"kubeconfig {where} does not exist"
            if len(files) == 1
            else f"none of the kubeconfig files {where} exists"
        )
    try:
        # kubectl (client-go's clientcmd loader) reads an empty file as an empty config and merges the
        # rest; the `kubernetes` package's merger would refuse it.
        configured = [path for path in existing if not _empty(path)]
        if not configured:
            raise CredentialsError(f"kubeconfig {where} holds no configuration")
        merger = KubeConfigMerger(os.pathsep.join(str(path) for path in configured))
        merged: ConfigNode = merger.config
        names = [str(entry["name"]) for entry in merged.safe_get("contexts") or []]
    except (OSError, *_MALFORMED) as error:
        raise CredentialsError(f"cannot read kubeconfig {where}: {error}") from None
    name = context or _first_current_context(merger)
    choices = ", ".join(names) or "none"
    if not name:
        raise CredentialsError(
            f"kubeconfig {where} sets no current-context; pass --context (one of: {choices})"
        )
    if name not in names:
        raise CredentialsError(f"context {name!r} is not in kubeconfig {where} (it has: {choices})")
    try:
        return _load(merged, name, f"context {name} of {where}")
    except _MALFORMED as error:
        raise CredentialsError(f"kubeconfig {where}, context {name}: {error}") from None


def _empty(path: Path) -> bool:
    """Whether the file holds no YAML document (no bytes, or only blanks and comments)."""
    return yaml.safe_load(path.read_text()) is None


def _first_current_context(merger: KubeConfigMerger) -> str | None:
    # kubectl takes the first file's; the loader alone would take the last one's.
    for path in merger.paths:
        name = merger.config_files[path].get("current-context")
        if name:
            return str(name)
    return None


def _load(merged: ConfigNode, name: str, source: str) -> Credentials:
    context = merged["contexts"].get_with_name(name)["context"]
    cluster = merged["clusters"].get_with_name(context["cluster"])["cluster"]
    user_name = context.safe_get("user")
    entry = merged["users"].get_with_name(user_name, safe=True) if user_name and "users" in merged else None
    user: ConfigNode | None = entry["user"] if entry is not None and "user" in entry else None
    exec_config = user["exec"] if user is not None and "exec" in user else None
    token_file = user.safe_get("tokenFile") if user is not None else None
    if user is not None:
        _check_auth_provider(user, user_name)
        # Left to ExecToken and FileToken (see the module's docstring).
        user.value.pop("exec", None)
        user.value.pop("tokenFile", None)
    configuration = Configuration()
    KubeConfigLoader(
        config_dict=merged,
        active_context=name,
        config_base_path=None,
        temp_file_path=str(temporary_directory()),
    ).load_and_set(configuration)
    if not configuration.host:
        raise CredentialsError(f"{source}: cluster {context['cluster']!r} has no server")
    _check_proxy(configuration.proxy, source)
    base = Path(user.path).parent if user is not None and user.path else Path.cwd()
    token: TokenSource | None = None
    certificate, key = configuration.cert_file, configuration.key_file
    header = configuration.api_key.get("BearerToken")
    if header:
        scheme, _space, value = str(header).partition(" ")
        if scheme.lower() != "bearer":
            raise CredentialsError(
                f"{source}: user {user_name} has a username and password, which Kubernetes stopped "
                "accepting in 1.19; use a token, a client certificate or an exec plugin"
            )
        token = FixedToken(value, f"the token of user {user_name}")
    elif token_file:
        token = FileToken(base / str(token_file))
    elif exec_config is not None:
        token, certificate, key = _exec_credentials(exec_config, base, cluster, certificate, key)
    return Credentials(
        server=str(configuration.host),
        source=source,
        ca_path=configuration.ssl_ca_cert,
        certificate_path=certificate,
        private_key_path=key,
        token=token,
        insecure=not configuration.verify_ssl,
        tls_server_name=configuration.tls_server_name,
        proxy=configuration.proxy,
        default_namespace=context.safe_get("namespace") or "default",
    )


def _check_auth_provider(user: ConfigNode, user_name: str) -> None:
    provider = user.safe_get("auth-provider") or {}
    if provider and provider.get("name") != "oidc":
        raise CredentialsError(
            f"user {user_name} uses auth-provider {provider.get('name')!r}, which kubectl dropped in 1.26; "
            "its replacement is an exec plugin (gke-gcloud-auth-plugin, kubelogin), which promsched runs"
        )


def _check_proxy(proxy: str | None, source: str) -> None:
    if proxy and urlsplit(proxy).scheme not in PROXY_SCHEMES:
        raise CredentialsError(
            f"{source}: proxy-url {proxy} is not an http:// or https:// proxy, the kinds promsched can use"
        )


def _exec_credentials(
    config: ConfigNode, base: Path, cluster: ConfigNode, certificate: str | None, key: str | None
) -> tuple[TokenSource | None, str | None, str | None]:
    """The plugin's token source, run once now so that a plugin that cannot work fails here; or, for a
    plugin that prints a client certificate, that certificate and key (used as long as the process runs)."""
    command = str(config["command"])
    provider = ExecProvider(config, str(base), cluster)
    hint = config.safe_get("installHint")

    def run() -> ExecStatus:
        try:
            status: Any = provider.run()
        except FileNotFoundError:
            where = f"relative to {base}" if os.sep in command else "on PATH"
            found = f"exec plugin {command} not found {where}"
            raise CredentialsError(f"{found}; {str(hint).strip()}" if hint else found) from None
        except PermissionError:
            raise CredentialsError(f"exec plugin {command} cannot be run: is it executable?") from None
        except ConfigException as error:
            raise CredentialsError(
                f"exec plugin {command} failed: {str(error).removeprefix('exec: ')}"
            ) from None
        if not isinstance(status, Mapping):
            raise CredentialsError(
                f"exec plugin {command} printed an ExecCredential whose status is no object"
            )
        return status

    first = run()
    if first.get("token") or "clientCertificateData" not in first:
        return ExecToken(command, run, first), certificate, key
    if not first.get("clientKeyData"):
        raise CredentialsError(
            f"exec plugin {command} printed status.clientCertificateData without clientKeyData"
        )
    return None, _temporary_file(first["clientCertificateData"]), _temporary_file(first["clientKeyData"])


def _temporary_file(pem: str) -> str:
    handle, name = tempfile.mkstemp(dir=temporary_directory(), suffix=".pem")
    with os.fdopen(handle, "w") as file:
        file.write(pem)
    return name


def in_cluster(directory: Path = SERVICE_ACCOUNT_DIR, environ: Mapping[str, str] = os.environ) -> Credentials:
    """The pod's ServiceAccount: its token is re-read as kubelet rotates it."""
    token = directory / "token"
    configuration = Configuration()
    try:
        InClusterConfigLoader(
            token_filename=str(token), cert_filename=str(directory / "ca.crt"), environ=environ
        ).load_and_set(configuration)
    except ConfigException as error:
        raise CredentialsError(f"in-cluster ServiceAccount ({directory}): {error}") from None
    namespace = directory / "namespace"
    return Credentials(
        server=str(configuration.host),
        source=f"the pod's ServiceAccount in {directory}",
        ca_path=configuration.ssl_ca_cert,
        token=FileToken(token),
        default_namespace=namespace.read_text().strip() if namespace.exists() else "default",
    )
