"""The address of /metrics and the probes (`--listen`), bound before Kopf starts: a busy port fails the
start with a clear message, where a bind inside Kopf's startup handler would be retried every minute
while nothing is scheduled."""

from __future__ import annotations

import socket

EXAMPLES = "e.g. 127.0.0.1:8080, 0.0.0.0:8080 or [::]:8080"
# Connections the kernel queues before the server accepts them (asyncio's default).
BACKLOG = 100


class StartupError(Exception):
    """A startup step that cannot succeed: `promsched run` prints it and exits 1."""


def parse(address: str) -> tuple[str, int]:
    """HOST:PORT as `--listen` takes it: an IPv6 host in brackets, no host for every IPv4 address."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or int(port) > 65535:
        raise StartupError(f"--listen {address}: not HOST:PORT; give one, {EXAMPLES}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port)


def bind(address: str) -> socket.socket:
    """A listening socket on `address`, for aiohttp's SockSite. `[::]` takes IPv4 connections too, as
    kube-scheduler's (Go's) listeners do."""
    host, port = parse(address)
    try:
        [(family, kind, protocol, _name, where), *_others] = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as error:
        raise StartupError(f"--listen {address}: {_lowered(error)}; give a host this machine has") from None
    listener = socket.socket(family, kind, protocol)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp's own sites do
        if family == socket.AF_INET6:
            listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        listener.bind(where)
        listener.listen(BACKLOG)
        listener.setblocking(False)
    except OSError as error:
        listener.close()
        raise StartupError(
            f"--listen {address}: {_lowered(error)}; choose another address with --listen"
        ) from None
    return listener


def _lowered(error: OSError) -> str:
    reason = error.strerror or str(error)
    return reason[:1].lower() + reason[1:]
