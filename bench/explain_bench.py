"""Scheduling-model benchmark: replicas placed per second, and the memory it takes.

    python bench/explain_bench.py [--nodes 500 5000] [--pods-per-node 30] [--replicas 100] [--check]

For each cluster size it builds a synthetic cluster the way a real fleet looks: the cluster
view bench's Nodes (3 zones, 5 instance types, dedicated and cordoned nodes, a node under
maintenance), each running ``--pods-per-node`` pods of mixed requests, one in five with
preferred or required pod anti-affinity of its own. Then it places a Deployment's replicas
one after another (``scheduler.place``: each replica sees the ones before), the
Deployment having required one-per-node anti-affinity on ``kubernetes.io/hostname``, a zone
topology spread (maxSkew 1, DoNotSchedule) and required node affinity.

It prints the replicas placed per second, the time to build the snapshot, and the memory:
the process's peak RSS (what a container limit sees) after building and placing.
Targets (issue 17): >= 200 replicas/s at 500 nodes, >= 20/s at 5,000 nodes, < 1.5 GB.
``--check`` exits 1 when one is missed.
"""
from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_bench import make_node
from webhook.scheduler import Cluster, place

JSON = dict[str, Any]
TARGETS = {500: 200.0, 5000: 20.0}
MEMORY_TARGET_MB = 1536.0
HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def running_pod(node: JSON, i: int, j: int) -> JSON:
    """Mixed requests; every fifth pod spreads itself (preferred or, rarely, required)."""
    app = f"svc-{(i * 7 + j) % 90}"
    spec: JSON = {"nodeName": node["metadata"]["name"], "containers": [{
        "name": "app", "image": f"example.com/{app}:1",
        "resources": {"requests": {"cpu": f"{25 * (1 + (i + j) % 8)}m", "memory": f"{64 * (1 + (i * j) % 8)}Mi"}}}]}
    if j % 5 == 0:
        term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
        spec["affinity"] = {"podAntiAffinity": {REQUIRED: [term]} if j % 15 == 0 else
                            {PREFERRED: [{"weight": 50, "podAffinityTerm": term}]}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{app}-{i}-{j}", "namespace": f"team-{(i + j) % 40}", "labels": {"app": app}},
            "spec": spec, "status": {"phase": "Running"}}


def build(nodes: int, pods_per_node: int) -> Cluster:
    node_objs = [make_node(i) for i in range(nodes)]
    pods = [running_pod(n, i, j) for i, n in enumerate(node_objs) for j in range(pods_per_node)]
    return Cluster.from_objects(node_objs, pods)


def replica(i: int) -> JSON:
    labels = {"app": "checkout"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"checkout-{i}", "namespace": "shop", "labels": labels},
            "spec": {
                "containers": [{"name": "app", "image": "example.com/checkout:2",
                                "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}],
                "affinity": {
                    "podAntiAffinity": {REQUIRED: [{"labelSelector": {"matchLabels": labels}, "topologyKey": HOSTNAME}]},
                    "nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["g5.2xlarge"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": labels}}]}}


def measure(nodes: int, pods_per_node: int, replicas: int) -> tuple[float, float, int, float]:
    """(seconds to build, replicas placed per second, replicas placed, peak RSS MB)."""
    gc.collect()
    start = time.perf_counter()
    cluster = build(nodes, pods_per_node)
    built = time.perf_counter() - start
    placed = 0
    start = time.perf_counter()
    for i in range(replicas):
        placement = place(replica(i), cluster, default_selector={"matchLabels": {"app": "checkout"}})
        if placement.node is not None:
            placed += 1
            cluster = placement.cluster
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return built, replicas / elapsed, placed, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    missed = False
    print(f"a {args.replicas}-replica Deployment (required hostname anti-affinity, zone spread, node affinity), "
          f"{args.pods_per_node} running pods per node")
    for nodes in args.nodes:
        built, rate, placed, peak = measure(nodes, args.pods_per_node, args.replicas)
        target = TARGETS.get(nodes)
        ok = target is None or rate >= target
        mem_ok = peak < MEMORY_TARGET_MB
        missed |= not ok or not mem_ok
        shown = f" (target >= {target:,.0f}/s): {'ok' if ok else 'MISSED'}" if target else ""
        print(f"{nodes:>6,} nodes: {rate:>8,.1f} replicas placed/s{shown}; {placed}/{args.replicas} placed; "
              f"snapshot built in {built:.2f} s; peak RSS {peak:,.0f} MB (target < {MEMORY_TARGET_MB:,.0f} MB): "
              f"{'ok' if mem_ok else 'MISSED'}")
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
