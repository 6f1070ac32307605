"""Node labeler benchmark: one pass over every node, and the memory it takes.

    python bench/labeler_bench.py [--nodes 5000] [--pods-per-node 30] [--check]

Builds the cluster view the labeler runs on, as its informers would fill it: the cluster view
bench's Nodes (allocatable, labels, taints) and ``--pods-per-node`` running pods each with
mixed requests, every pod projected by ``cluster.snapshot.project_pod`` and indexed by node by
the labeler's own change handlers. Then it times one pass in dry-run mode (every node's labels
computed and compared with the node's, the writes planned; no API server: the writes are
rate-limited network calls, not computation) and prints the seconds of a pass and of the
first one (which also computes every pod's requests, as the informer hands them over), the
writes the pass would make, and the process's peak RSS (what a container limit sees).
Targets (issue 18): one pass over 5,000 nodes and 150,000 pods in under 2 s and under 500 MB.
``--check`` exits 1 when one is missed.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_bench import make_node
from bench.explain_bench import running_pod
from webhook.cluster.cache import NODES, ClusterCache, project_node
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.labeler.controller import PODS, Labeler, LabelerConfig

SECONDS_TARGET = 2.0
MEMORY_TARGET_MB = 500.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def fill(cache: ClusterCache, nodes: int, pods_per_node: int) -> tuple[int, float, float]:
    """Fill the informers' stores as their first lists would; (pods, seconds projecting them,
    seconds of the labeler's handlers). ``Informer._replace`` is what a LIST completes with: it
    swaps the store in and notifies the handlers, where the labeler computes each pod's
    requests (memoised over the subtrees the projections share)."""
    node_objs = [make_node(i) for i in range(nodes)]
    cache.informers[NODES]._replace({n["metadata"]["name"]: project_node(n) for n in node_objs})
    project = cache.informers[PODS].project
    pods: dict[str, Any] = {}
    projected = 0.0
    for i, node in enumerate(node_objs):  # one node's pods at a time, as LIST pages come
        raw = [running_pod(node, i, j) for j in range(pods_per_node)]
        began = time.perf_counter()
        pods.update((f"{p['metadata']['namespace']}/{p['metadata']['name']}", project(p)) for p in raw)
        projected += time.perf_counter() - began
    began = time.perf_counter()
    cache.informers[PODS]._replace(pods)
    return len(pods), projected, time.perf_counter() - began


async def measure(nodes: int, pods_per_node: int) -> tuple[float, float, float, int, int, float]:
    """(seconds the informer projects the pods, seconds of the labeler's handlers, seconds for
    one pass, pods, writes planned, peak RSS MB).

    The handlers are what the labeler does as each pod arrives (its requests, computed once
    per pod event); a pass sums them per node, computes the labels and plans the writes. The
    first pass after a start costs both."""
    client = Client(ClusterConfig("http://127.0.0.1:1"))  # never called: the pass is a dry run
    cache = ClusterCache(client)
    labeler = Labeler(client, cache, LabelerConfig(dry_run=True))
    count, projected, handled = fill(cache, nodes, pods_per_node)
    gc.collect()
    began = time.perf_counter()
    report, computed, changes = await labeler.run_pass()
    seconds = time.perf_counter() - began
    assert report.nodes == nodes and not report.skipped, report.skipped
    await client.close()
    return projected, handled, seconds, count, len(changes), peak_mb()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    projected, handled, seconds, pods, writes, peak = asyncio.run(measure(args.nodes, args.pods_per_node))
    # The target holds for the first pass too: every pod's requests computed, then a pass.
    first = handled + seconds
    fast, small = first < SECONDS_TARGET, peak < MEMORY_TARGET_MB
    print(f"{args.nodes:,} nodes, {pods:,} pods: one pass in {seconds:.2f} s, the first with every pod's "
          f"requests {first:.2f} s (target < {SECONDS_TARGET:g} s): {'ok' if fast else 'MISSED'}; "
          f"{writes:,} node(s) to write; the informer's projection of the pods took {projected:.2f} s more; "
          f"peak RSS {peak:,.0f} MB (target < {MEMORY_TARGET_MB:,.0f} MB): {'ok' if small else 'MISSED'}")
    return 1 if args.check and not (fast and small) else 0


if __name__ == "__main__":
    sys.exit(main())
