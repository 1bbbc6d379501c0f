"""The memory client TLS connections hold, per event loop, without a cluster.

    python -m bench.tls_micro [--connections 64] [--sizes 2048,4194304] [--rcvbuf 0]

A local TLS server (the sandbox's PKI) sends each of N client connections one response of SIZE bytes;
the clients read all of it and stay connected. Each loop and size runs in a client process of its own,
which reports its RSS growth (VmRSS) from before the connections to once all have read. Loops:

- asyncio-256k: asyncio's loop and TLS protocol as they come (256 KiB zero-filled read buffers);
- asyncio-32k: the same after promsched's wiring.limit_tls_read_buffers (`--event-loop asyncio`);
- uvloop: uvloop's loop and its own TLS protocol (`promsched run`'s default), which that leaves alone.

`--rcvbuf` sets the clients' SO_RCVBUF (0: the kernel's default), which bounds each read.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

from promsched.operating import wiring
from promsched.sandbox import certifying

LOOPS = ("asyncio-256k", "asyncio-32k", "uvloop")


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


async def serve(cert: Path, key: Path, size: int) -> None:
    """Sends `size` bytes to each connection, then holds it until the client closes; prints the port."""

    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"x" * size)
        await writer.drain()
        await reader.read()
        writer.close()

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = await asyncio.start_server(respond, "127.0.0.1", 0, ssl=context)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


async def connect(ca: Path, port: int, size: int, connections: int, rcvbuf: int) -> float:
    """MiB of RSS gained once `connections` clients have each read `size` bytes."""
    context = ssl.create_default_context(cafile=ca)
    loop = asyncio.get_running_loop()
    done = 0
    closing = asyncio.Event()

    async def read() -> None:
        nonlocal done
        sock = socket.socket()
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock, ssl=context, server_hostname="localhost")
        got = 0
        while got < size:
            got += len(await reader.read(64 * 1024))
        done += 1
        await closing.wait()
        writer.close()

    before = rss_kib()
    clients = [asyncio.create_task(read()) for _ in range(connections)]
    while done < connections:
        await asyncio.wait(clients, timeout=0.05)  # a deadline per check: a failed client ends the wait
        failed = [client for client in clients if client.done() and client.exception()]
        if failed:
            await failed[0]
    after = rss_kib()
    closing.set()
    await asyncio.gather(*clients)
    return (after - before) / 1024


def client(loop_name: str, ca: Path, port: int, size: int, connections: int, rcvbuf: int) -> None:
    if loop_name == "asyncio-32k":
        wiring.limit_tls_read_buffers()
    loop = wiring.new_event_loop("uvloop" if loop_name == "uvloop" else "asyncio")
    try:
        print(f"{loop.run_until_complete(connect(ca, port, size, connections, rcvbuf)):.1f}")
    finally:
        loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--sizes", default="2048,4194304", help="bytes each connection reads")
    parser.add_argument("--rcvbuf", type=int, default=0)
    parser.add_argument("--serve", nargs=3, metavar=("CERT", "KEY", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--client", nargs=4, metavar=("LOOP", "CA", "PORT", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(Path(args.serve[0]), Path(args.serve[1]), int(args.serve[2])))
        return
    if args.client:
        loop_name, ca, port, size = args.client
        client(loop_name, Path(ca), int(port), int(size), args.connections, args.rcvbuf)
        return
    with tempfile.TemporaryDirectory() as directory:
        pki = certifying.issue(Path(directory))
        for size in (int(text) for text in args.sizes.split(",") if text):
            command = [sys.executable, "-m", "bench.tls_micro"]
            counts = [f"--connections={args.connections}", f"--rcvbuf={args.rcvbuf}"]
            server = subprocess.Popen(
                [*command, "--serve", str(pki.serving_cert), str(pki.serving_key), str(size)],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert server.stdout is not None
                port = server.stdout.readline().strip()
                grown = {
                    name: subprocess.run(
                        [*command, "--client", name, str(pki.ca_cert), port, str(size), *counts],
                        capture_output=True,
                        text=True,
                        check=True,
                        timeout=300,
                    ).stdout.strip()
                    for name in LOOPS
                }
            finally:
                server.terminate()
                server.wait(timeout=30)
            print(
                f"{args.connections} TLS connections reading {size} bytes each"
                f"{f', SO_RCVBUF {args.rcvbuf}' if args.rcvbuf else ''}, MiB of RSS gained: "
                + ", ".join(f"{name} +{mib}" for name, mib in grown.items())
            )


if __name__ == "__main__":
    main()
