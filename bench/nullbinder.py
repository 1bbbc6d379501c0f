"""The null binder: binds pending pods of one schedulerName round-robin over the nodes, with no filtering
and no scoring, through promsched's own client stack. Its throughput is the API server's limit for
bindings on this machine, against which the schedulers are measured.

    python -m bench.nullbinder --kubeconfig KUBECONFIG --scheduler-name NAME [--concurrency 32] [--ready FILE]

It lists and then watches the pods whose spec.schedulerName is NAME and spec.nodeName is empty, and keeps
`--concurrency` bindings in flight. It runs until terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
from pathlib import Path
from typing import Any

import aiohttp

from bench.kubeapi import watch, watch_session
from promsched.kube.configuring import from_kubeconfig
from promsched.kube.requests import Request, bind_pod
from promsched.kube.sending import ApiError, KubeClient

logger = logging.getLogger("nullbinder")

Work = tuple[str, str, str]  # namespace, name, uid


async def _bind_worker(
    client: KubeClient, queue: asyncio.Queue[Work], nodes: itertools.cycle[str], seen: set[str]
) -> None:
    while True:
        namespace, name, uid = await queue.get()
        try:
            await client.send(bind_pod(namespace, name, uid, next(nodes), {}))
        except ApiError as error:
            if error.status not in (404, 409):  # gone, or bound already: nothing to do
                logger.warning("binding %s/%s failed: %s", namespace, name, error)
                seen.discard(uid)  # a later event of the pod retries it
        except (aiohttp.ClientError, TimeoutError) as error:
            logger.warning("binding %s/%s failed: %s", namespace, name, error)
            await asyncio.sleep(0.5)
            queue.put_nowait((namespace, name, uid))


async def run(kubeconfig: Path, scheduler_name: str, concurrency: int, ready: Path | None) -> None:
    credentials = from_kubeconfig(kubeconfig)
    selector = f"spec.schedulerName={scheduler_name},spec.nodeName="
    queue: asyncio.Queue[Work] = asyncio.Queue()
    seen: set[str] = set()

    def offer(pod: dict[str, Any]) -> None:
        metadata = pod["metadata"]
        uid = metadata["uid"]
        if uid in seen or pod["spec"].get("nodeName") or metadata.get("deletionTimestamp"):
            return
        seen.add(uid)
        queue.put_nowait((metadata["namespace"], metadata["name"], uid))

    async with (
        KubeClient(credentials, connections=concurrency) as client,
        watch_session(credentials) as session,
    ):
        listing = await client.send(Request("GET", "/api/v1/nodes"))
        nodes = itertools.cycle(sorted(node["metadata"]["name"] for node in listing["items"]))
        workers = [asyncio.create_task(_bind_worker(client, queue, nodes, seen)) for _ in range(concurrency)]
        try:
            while True:
                pods = await client.send(Request("GET", "/api/v1/pods", params={"fieldSelector": selector}))
                for pod in pods["items"]:
                    offer(pod)
                version = pods["metadata"]["resourceVersion"]
                if ready is not None:
                    await asyncio.to_thread(ready.touch)
                try:
                    params = {"fieldSelector": selector, "resourceVersion": version}
                    async for kind, pod in watch(session, "/api/v1/pods", params):
                        if kind in ("ADDED", "MODIFIED"):
                            offer(pod)
                except (RuntimeError, aiohttp.ClientError, TimeoutError) as error:
                    logger.warning("watch ended: %s; listing again", error)
                    await asyncio.sleep(0.2)
        finally:
            for worker in workers:
                worker.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--scheduler-name", required=True)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--ready", type=Path, help="touched once the first listing is done")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run(args.kubeconfig, args.scheduler_name, args.concurrency, args.ready))


if __name__ == "__main__":
    main()
