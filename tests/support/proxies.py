"""A TCP proxy that can freeze its open connections without closing them (a watch that stalls silently),
or cut the client off altogether (a partition) until it is mended."""

from __future__ import annotations

import contextlib
import socket
import threading

from promsched.sandbox.control_plane.supervising import free_port


class StallingProxy:
    """Relays 127.0.0.1:port to `upstream`. After `stall()`, connections open at that moment stop
    relaying (their sockets stay open, as a dead NAT or a hung load balancer leaves them); new ones work.
    After `cut()`, every connection is closed and new ones are closed at once, until `mend()`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._generation = 0
        self._stalled_below = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        with self._lock:
            self._stalled_below = self._generation + 1

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def mend(self) -> None:
        with self._lock:
            self._cut = False

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                if self._cut:
                    raise ConnectionRefusedError("the proxy is cut")
                server = socket.create_connection(self.upstream)
            except OSError:  # cut, or the upstream is down (restarting): the client sees a reset
                client.close()
                continue
            with self._lock:
                self._generation += 1
                generation = self._generation
                self._sockets += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target, generation), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, generation: int) -> None:
        with contextlib.suppress(OSError):
            while not self._closed.is_set():
                data = source.recv(65536)
                if not data:
                    break
                if generation < self._stalled_below:
                    self._closed.wait()  # hold the bytes and the socket: the peer sees silence
                    return
                target.sendall(data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()
