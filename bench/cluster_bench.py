"""Cluster view benchmark: how long the watch-backed cache takes to sync, and what it costs.

    python bench/cluster_bench.py [--nodes 5000] [--namespaces 1000] [--priority-classes 50] [--check]

Starts the fake API server (tests.kit.fakeapi) in a child process, loaded with realistic Nodes
(~20 labels, taints on some, allocatable and capacity, 6 conditions, addresses, nodeInfo, 10
images and managedFields: most of a Node is what the projection drops), labelled Namespaces and
PriorityClasses. This process then runs only the ClusterCache the server would, so its memory
is the view's alone, and prints:
- the time from ``start()`` until every informer has synced;
- objects per resource;
- the memory the view added: RSS after the sync minus RSS before it (what the pod's limit sees),
  and, from a second, traced sync, what tracemalloc counts as kept and at the peak;
- how long ``nodes()`` takes (it runs on the admission path): cached, and right after a node
  changed (the tuple of projections is rebuilt).
Targets: synced in under 5 s and under 150 MB more memory, at 5,000 Nodes, 1,000 Namespaces
and 50 PriorityClasses.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: the checkout's webhook and tests.kit packages

from webhook.cluster import config as cluster_config
from webhook.cluster.cache import ClusterCache
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig

SYNC_TARGET = 5.0  # seconds
MEMORY_TARGET = 150.0  # MB over the same process without the view
READY = "fake API server ready"
JSON = dict[str, Any]


# --- realistic objects (built in the fake API server's process only) -----------------------------

ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
INSTANCE_TYPES = ("m6i.2xlarge", "m6i.4xlarge", "c6i.8xlarge", "r6i.4xlarge", "g5.2xlarge")
STAMP = "2024-05-01T10:00:00Z"


def _node_labels(i: int, name: str) -> dict[str, str]:
    zone, itype = ZONES[i % len(ZONES)], INSTANCE_TYPES[i % len(INSTANCE_TYPES)]
    return {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": itype, "beta.kubernetes.io/instance-type": itype,
        "topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/region": "eu-west-1", "failure-domain.beta.kubernetes.io/zone": zone,
        "topology.ebs.csi.aws.com/zone": zone, "karpenter.sh/capacity-type": "spot" if i % 4 else "on-demand",
        "karpenter.k8s.aws/instance-cpu": str(8 << (i % 3)), "karpenter.k8s.aws/instance-memory": str(32768 << (i % 3)),
        "eks.amazonaws.com/nodegroup": f"pool-{i % 13}", f"example.com/pool-{i % 13}": "ab"[i % 2],
        "example.com/rack": f"rack-{i % 64:02d}", "node-role.kubernetes.io/worker": "",
        "feature.node.kubernetes.io/cpu-cpuid.AVX512F": "true",
    }


def _taints(i: int) -> list[JSON]:
    """A few nodes are dedicated or being drained, as in a real fleet."""
    taints = []
    if i % 10 == 0:
        taints.append({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"})
    if i % 50 == 1:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": STAMP})
    if i % 97 == 2:
        taints.append({"key": "example.com/maintenance", "value": "true", "effect": "NoExecute"})
    return taints


def _conditions() -> list[JSON]:
    def cond(kind: str, status: str, reason: str, message: str) -> JSON:
        return {"type": kind, "status": status, "lastHeartbeatTime": STAMP, "lastTransitionTime": STAMP,
                "reason": reason, "message": message}

    return [cond("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond("KernelDeadlock", "False", "KernelHasNoDeadlock", "kernel has no deadlock"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status")]


def _images(i: int) -> list[JSON]:
    repos = ("registry.k8s.io/kube-proxy", "amazon/aws-node", "amazon/aws-ebs-csi-driver", "coredns/coredns",
             "prometheus/node-exporter", "fluent/fluent-bit", "grafana/agent", "example.com/team/web",
             "example.com/team/api", "istio/proxyv2")
    return [{"names": [f"{repo}@sha256:{(i * 31 + n):064x}", f"{repo}:v1.{n}.{i % 7}"],
             "sizeBytes": 20_000_000 + n * 7_654_321} for n, repo in enumerate(repos)]


def make_node(i: int) -> JSON:
    name = f"ip-10-{i // 65536 % 256}-{i // 256 % 256}-{i % 256}.eu-west-1.compute.internal"
    resources = {"cpu": "7910m", "memory": "31669304Ki", "ephemeral-storage": "95551679124", "pods": "58",
                 "hugepages-1Gi": "0", "hugepages-2Mi": "0", "attachable-volumes-aws-ebs": "25"}
    fields: JSON = {"f:metadata": {"f:labels": {f"f:{k}": {} for k in list(_node_labels(i, name))[:8]}}}
    managed: list[JSON] = [{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": STAMP,
                            "fieldsType": "FieldsV1", "fieldsV1": fields}
                           for manager in ("kubelet", "aws-cloud-controller-manager", "karpenter")]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": _node_labels(i, name), "managedFields": managed,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                                         "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-{i:017x}"}}'}},
            "spec": {"podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24", "providerID": f"aws:///eu-west-1a/i-{i:017x}",
                     "taints": _taints(i), "unschedulable": i % 50 == 1},
            "status": {"capacity": resources, "allocatable": resources, "conditions": _conditions(),
                       "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 256 % 256}.{i % 256}"},
                                     {"type": "Hostname", "address": name}, {"type": "InternalDNS", "address": name}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                       "nodeInfo": {"machineID": f"{i:032x}", "systemUUID": f"ec2{i:029x}", "bootID": f"{i * 7:032x}",
                                    "kernelVersion": "5.10.215-203.850.amzn2.x86_64", "osImage": "Amazon Linux 2",
                                    "containerRuntimeVersion": "containerd://1.7.11", "kubeletVersion": "v1.31.0",
                                    "kubeProxyVersion": "v1.31.0", "operatingSystem": "linux", "architecture": "amd64"},
                       "images": _images(i)}}


def make_namespace(i: int) -> JSON:
    # team-0 .. team-39 are the namespaces the server bench's reviews and policies name.
    name = f"team-{i}"
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, "team": f"t{i % 40}",
                                                  "env": ("prod", "staging", "dev")[i % 3], "tier": "web",
                                                  "istio-injection": "enabled" if i % 2 else "disabled"}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def make_priority_class(i: int) -> JSON:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"tier-{i}"},
            "value": 1000 * i, "globalDefault": False, "preemptionPolicy": "Never" if i % 5 == 0 else
            "PreemptLowerPriority", "description": f"Workloads of tier {i}."}


def cluster_objects(nodes: int, namespaces: int, priority_classes: int) -> Iterator[JSON]:
    yield from (make_namespace(i) for i in range(namespaces))
    yield from (make_priority_class(i) for i in range(priority_classes))
    yield from (make_node(i) for i in range(nodes))


def placement_policies(count: int) -> Iterator[JSON]:
    """The server bench's generated policies (``engine_bench.policy_yaml``) as PlacementPolicy objects."""
    import yaml

    from bench.engine_bench import policy_yaml

    for i in range(count):
        yield yaml.safe_load(policy_yaml(i))


# --- the fake API server, in its own process -----------------------------------------------------


async def _serve_api(args: argparse.Namespace) -> None:
    """Child process: load the objects, serve, say so on stdout, then serve until killed."""
    from tests.kit.fakeapi import FakeApiServer

    server = FakeApiServer("1.31.0", record_requests=False, placement_policies=bool(args.policies))
    server.load(cluster_objects(args.nodes, args.namespaces, args.priority_classes))
    server.load(placement_policies(args.policies))
    await server.start()
    server.write_kubeconfig(args.kubeconfig)
    print(READY, flush=True)
    await asyncio.Event().wait()


@contextmanager
def fake_api(kubeconfig: Path, *, nodes: int, namespaces: int, priority_classes: int, policies: int = 0,
             preexec: Callable[[], None] | None = None) -> Iterator[subprocess.Popen[str]]:
    """The fake API server in a child process (its heap and CPU are not the measured ones),
    serving until the block ends; ``kubeconfig`` is written once it listens. ``policies``: that
    many of the server bench's generated policies as PlacementPolicy objects (the CRD served)."""
    argv = [sys.executable, __file__, "--serve-api", "--kubeconfig", str(kubeconfig), "--nodes", str(nodes),
            "--namespaces", str(namespaces), "--priority-classes", str(priority_classes), "--policies", str(policies)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env, preexec_fn=preexec)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until loaded and listening, or the child died
        if line.strip() != READY:
            raise SystemExit(f"fake API server did not start (exit {proc.wait(30)})")
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)


# --- the measured cache --------------------------------------------------------------------------


def rss_mb() -> float:
    """This process's resident set now (VmRSS); the peak from getrusage where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class Figures:
    sync_seconds: float
    objects: dict[str, int]
    rss_before: float
    rss_config: float  # after reading the kubeconfig
    rss_after: float
    nodes_cached_us: float
    nodes_changed_us: float
    traced_kept_mb: float = 0.0
    traced_peak_mb: float = 0.0


def _call_us(fn: Callable[[], object], before: Callable[[], None] = lambda: None, repeat: int = 200) -> float:
    """Median microseconds of one ``fn()`` call, ``before()`` run untimed ahead of each."""
    times = []
    for _ in range(repeat):
        before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def _time_nodes(cache: ClusterCache) -> tuple[float, float]:
    """``nodes()`` as admission sees it: from the memo, and right after a node changed. A
    change is simulated by bumping the informer's generation (what every store change does),
    so the call rebuilds the tuple of all node projections exactly as after a watch event."""
    informer = cache.informers["nodes"]

    def changed() -> None:
        informer.generation += 1

    return _call_us(cache.nodes), _call_us(cache.nodes, changed, repeat=50)


async def _synced_cache(config: ClusterConfig, timeout: float) -> tuple[ClusterCache, Client, float]:
    client = Client(config)
    cache = ClusterCache(client)
    began = time.perf_counter()
    await cache.start()
    if not await cache.wait_synced(timeout):
        raise SystemExit(f"cluster view not synced after {timeout:g} s: {cache.status()}")
    return cache, client, time.perf_counter() - began


async def _close(cache: ClusterCache, client: Client) -> None:
    await cache.stop()
    await client.close()


async def measure(kubeconfig: Path, timeout: float) -> Figures:
    gc.collect()
    before = rss_mb()  # everything imported, no view yet: the server without --cluster-view
    # Reading a kubeconfig imports the official client (~20 MB); the server pays it only with
    # --kubeconfig (the in-cluster service account path does not), so it is counted apart.
    config = cluster_config.load(str(kubeconfig))
    loaded = rss_mb()
    cache, client, seconds = await _synced_cache(config, timeout)
    gc.collect()  # what the view keeps, not garbage a collection would free anyway
    figures = Figures(seconds, {name: len(inf) for name, inf in cache.informers.items()}, before, loaded,
                      rss_mb(), *_time_nodes(cache))
    await _close(cache, client)
    # tracemalloc slows every allocation several-fold, so it gets a sync of its own: the
    # timed one above stays honest.
    del cache, client
    gc.collect()
    tracemalloc.start()
    cache, client, _ = await _synced_cache(config, timeout * 4)
    gc.collect()
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    figures.traced_kept_mb, figures.traced_peak_mb = kept / 2**20, peak / 2**20
    await _close(cache, client)
    return figures


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report(figures: Figures, args: argparse.Namespace) -> bool:
    """Print every figure beside its target; whether every target was met."""
    added = figures.rss_after - figures.rss_before
    sync_ok, memory_ok = figures.sync_seconds < SYNC_TARGET, added < MEMORY_TARGET
    print(f"cluster view over {args.nodes:,} Nodes, {args.namespaces:,} Namespaces, {args.priority_classes:,} "
          "PriorityClasses (plus the API server's defaults); fake API server in a child process")
    print(f"synced in {figures.sync_seconds:.2f} s (target < {SYNC_TARGET:g} s): {_verdict(sync_ok)}")
    print("objects: " + ", ".join(f"{name} {count:,}" for name, count in figures.objects.items()))
    print(f"memory the view added: RSS {figures.rss_before:.1f} -> {figures.rss_after:.1f} MB, "
          f"+{added:.1f} MB (target < {MEMORY_TARGET:g} MB): {_verdict(memory_ok)}; of which reading the "
          f"kubeconfig +{figures.rss_config - figures.rss_before:.1f} MB, the cache "
          f"+{figures.rss_after - figures.rss_config:.1f} MB")
    print(f"tracemalloc (a second, traced sync): kept {figures.traced_kept_mb:.1f} MB, "
          f"peak {figures.traced_peak_mb:.1f} MB")
    print(f"nodes(): {figures.nodes_cached_us:.2f} us cached, {figures.nodes_changed_us:.1f} us right after a node "
          f"changed (median)")
    return sync_ok and memory_ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--namespaces", type=int, default=1000)
    parser.add_argument("--priority-classes", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=60.0, help="give up on a sync after this many seconds")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--serve-api", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--policies", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_api:
        asyncio.run(_serve_api(args))
        return 0
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        with fake_api(kubeconfig, nodes=args.nodes, namespaces=args.namespaces,
                      priority_classes=args.priority_classes):
            ok = report(asyncio.run(measure(kubeconfig, args.timeout)), args)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
