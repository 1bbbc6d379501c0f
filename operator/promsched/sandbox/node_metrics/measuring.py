"""How long one scrape of the node-metrics exporter takes to render at scale:
`python -m promsched.sandbox.node_metrics.measuring --nodes 1000 --pods 10000`.

The exporter is fed pods as its watch would feed them (half with a usage annotation, half taking the
default share of their requests), then renders its whole exposition several times; the medians of
CPU and wall time are printed, with the time the pods took to take in (what a re-list costs).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from promsched.sandbox.node_metrics.exporting import Exporter
from promsched.sandbox.node_metrics.usages import ANNOTATION


def pod(index: int, nodes: int) -> dict[str, Any]:
    return {
        "metadata": {
            "uid": f"uid-{index}",
            "namespace": "measure",
            "name": f"pod-{index}",
            "annotations": {ANNOTATION: "cpu=150m,memory=200Mi"} if index % 2 else {},
        },
        "spec": {
            "nodeName": f"node-{index % nodes}",
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}],
        },
        "status": {"phase": "Running"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Time the sandbox exporter's scrape rendering.")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--renders", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        state = Path(directory) / "profiles.json"
        state.write_text("{" + ",".join(f'"node-{i}": {{}}' for i in range(args.nodes)) + "}")
        exporter = Exporter.from_state_file(state, since=time.time() - 600)
    pods = [pod(index, args.nodes) for index in range(args.pods)]
    started = time.perf_counter()
    for each in pods:
        exporter.ledger.observe(each)
    taken_in = time.perf_counter() - started
    walls, cpus = [], []
    for _ in range(args.renders):
        started, used = time.perf_counter(), time.process_time()
        text = exporter.render()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - used)
    # CPU time is the steadier figure on a shared machine; wall time adds whatever else ran meanwhile.
    print(
        f"{args.nodes} nodes, {args.pods} running pods: one scrape renders in "
        f"{statistics.median(cpus) * 1000:.1f} ms of CPU ({statistics.median(walls) * 1000:.1f} ms wall; "
        f"medians of {args.renders}; {len(text) / 1e6:.1f} MB, {text.count(chr(10))} lines); "
        f"taking in the pods took {taken_in:.2f} s"
    )


if __name__ == "__main__":
    main()
