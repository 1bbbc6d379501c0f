"""Credentials for one API server: where it is, how to trust it, and a bearer token that may change.

A token comes from a source: fixed in the kubeconfig, a file re-read as it rotates (projected
ServiceAccount tokens, `tokenFile`), or an exec credential plugin (what EKS, GKE and AKS kubeconfigs
use), whose ExecCredential is kept until it expires. Every source is asked again after the API server
answers 401. `promsched.kube.configuring` builds these from kubeconfig files or the pod's ServiceAccount;
`promsched.kube.sending` puts them on the wire.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# client-go re-reads token files once a minute (its cachingTokenSource): kubelet rotates them in place.
TOKEN_FILE_REREAD = timedelta(minutes=1)
# An exec credential is renewed this long before it expires, so no request goes out with one that
# expires in flight.
EXPIRY_MARGIN = timedelta(seconds=10)


class CredentialsError(RuntimeError):
    """No usable credentials; the message says why and what to do."""


def _now() -> datetime:
    return datetime.now(UTC)


class TokenSource:
    """A bearer token, kept until `_produce` says it expires (None: until the API server rejects it).

    Thread-safe: Kopf runs synchronous handlers in threads, and exec plugins run in one so that they do
    not stall the event loop.
    """

    # Whether asking again can give another token (a fixed one cannot: a 401 is final).
    refreshable = True

    def __init__(self, description: str) -> None:
        self.description = description
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expiry: datetime | None = None

    def cached(self) -> str | None:
        """The token while it is valid, without reading or running anything; else None."""
        token, expiry = self._token, self._expiry
        if token is None or (expiry is not None and _now() >= expiry - EXPIRY_MARGIN):
            return None
        return token

    def fetch(self) -> str:
        """A valid token, produced anew if there is none (may block: it can run a plugin)."""
        with self._lock:
            token = self.cached()
            if token is None:
                token, self._expiry = self._produce()
                self._token = token
            return token

    def refresh(self, rejected: str) -> str:
        """A token to replace `rejected`, which got a 401; the current one if another caller renewed it."""
        with self._lock:
            if self._token == rejected:
                self._token = None
        return self.fetch()

    def _produce(self) -> tuple[str, datetime | None]:
        raise NotImplementedError


class FixedToken(TokenSource):
    refreshable = False

    def __init__(self, token: str, description: str) -> None:
        super().__init__(description)
        self._value = token

    def _produce(self) -> tuple[str, datetime | None]:
        return self._value, None


class FileToken(TokenSource):
    def __init__(self, path: Path) -> None:
        super().__init__(f"the token in {path}")
        self.path = path

    def _produce(self) -> tuple[str, datetime | None]:
        try:
            token = self.path.read_text().strip()
        except OSError as error:
            raise CredentialsError(f"cannot read the token file {self.path}: {error.strerror}") from None
        if not token:
            raise CredentialsError(f"the token file {self.path} is empty")
        return token, _now() + TOKEN_FILE_REREAD


ExecStatus = Mapping[str, Any]


class ExecToken(TokenSource):
    """The token of an exec credential plugin. `run` runs it and returns its ExecCredential's status,
    raising CredentialsError when it cannot; `first` is a status it already returned."""

    def __init__(self, command: str, run: Callable[[], ExecStatus], first: ExecStatus | None = None) -> None:
        super().__init__(f"the token from exec plugin {command}")
        self.command = command
        self._run = run
        if first is not None:
            self._token, self._expiry = self._parse(first)

    def _produce(self) -> tuple[str, datetime | None]:
        return self._parse(self._run())

    def _parse(self, status: ExecStatus) -> tuple[str, datetime | None]:
        token = status.get("token")
        if not isinstance(token, str) or not token:
            raise CredentialsError(
                f"exec plugin {self.command} printed an ExecCredential without status.token "
                "(promsched takes client certificates from a plugin only when it first runs)"
            )
        return token, parse_expiry(status, self.command)


def parse_expiry(status: ExecStatus, command: str) -> datetime | None:
    """status.expirationTimestamp (RFC 3339), or None: the credential holds until it is rejected."""
    stamp = status.get("expirationTimestamp")
    if not stamp:
        return None
    try:
        expiry = datetime.fromisoformat(str(stamp))
    except ValueError:
        raise CredentialsError(
            f"exec plugin {command} printed status.expirationTimestamp {stamp!r}, which is not RFC 3339"
        ) from None
    return expiry if expiry.tzinfo is not None else expiry.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Credentials:
    server: str
    source: str  # where they were read: for messages, e.g. "context prod of ~/.kube/config"
    ca_path: str | None = None
    certificate_path: str | None = None
    private_key_path: str | None = None
    token: TokenSource | None = None
    insecure: bool = False
    tls_server_name: str | None = None  # the name to verify the server's certificate for, and send as SNI
    proxy: str | None = None
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

    def describe(self) -> str:
        """What authenticates, and where it was read: the answer to "who got the 401?"."""
        if self.token is not None:
            what = self.token.description
        elif self.certificate_path:
            what = f"the client certificate {self.certificate_path}"
        else:
            what = "no credentials at all (anonymous)"
        return f"{what} ({self.source})"
