"""Rebalancer benchmark: one decision pass (``rebalance.decide.plan``) over a large cluster.

    python bench/rebalance_bench.py [--nodes 5000] [--pods 150000] [--owners 3000] [--check]

The cluster is the cluster view bench's fleet (``cluster_bench.make_node``: 3 zones, 5 instance
types, Karpenter's capacity-type label with one node in four on-demand and the rest spot, one
in ten tainted for GPUs, one in fifty cordoned, some under maintenance), projected as the
rebalancer's cluster view holds it. On it run ``--pods`` pods: two DaemonSets on every node (a
node exporter that tolerates every taint, so the spot classes call it interruptible, and
kube-proxy in kube-system) and the rest from ``--owners`` Deployments (each through its
ReplicaSet) of mixed requests, 40 namespaces, placed over the nodes they tolerate:

* one owner in ten is interruptible (annotated, and preferring spot by a weight-100 term, as
  admission writes a ``capacity: spot`` policy) and runs on spot but for its first pod, on
  on-demand (a candidate each);
* one owner in 25 prefers zone eu-west-1a (weight 50, as a policy writes it) and has its first two
  pods in other zones (two candidates each);
* one owner in 50 has a pod not Ready (busy), one in three a budget of ``maxUnavailable: 1`` and
  one in 17 a budget that allows no disruption now.

It times ``plan`` (wall and CPU) with the default settings (at most 5 moves a pass, which stops
the simulations once 5 pods move), and again with no limit on moves, so that the pass runs all
the simulations a pass may (``Settings.max_simulations``): the slowest pass there is. It
measures the memory of a pass: the peak of Python allocations during it (tracemalloc, in a
third run: tracing slows it) and the growth of the process's peak RSS. Target (issue 30): a pass
over 5,000 nodes and 150,000 pods in under 10 s, judged on its CPU time: a pass is one thread
of pure Python, so on a core of its own its wall time is its CPU time, while on a shared machine
the wall time also counts the waits for a core. ``--check`` exits 1 when the slowest pass misses
it. Figures are those of whatever machine runs it.
"""
from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_bench import make_node  # noqa: E402
from webhook.cluster.cache import project_node  # noqa: E402
from webhook.cluster.snapshot import SharedValues, project_pdb, project_workload  # noqa: E402
from webhook.rebalance.decide import Settings, World, plan, project_pod  # noqa: E402
from webhook.rebalance.model import Decision, Verdict  # noqa: E402
from webhook.spot.config import SpotConfig  # noqa: E402

JSON = dict[str, Any]
TARGET_SECONDS = 10.0
CAPACITY, ZONE = "karpenter.sh/capacity-type", "topology.kubernetes.io/zone"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
INTERRUPTIBLE = "placement.novasphere.dev/interruptible"
STAMP = "2026-11-27T06:00:00Z"


def _status(ready: bool) -> JSON:
    """As a kubelet reports a running pod (the projection keeps only phase, startTime, Ready)."""
    return {"phase": "Running", "startTime": STAMP, "hostIP": "10.0.0.1", "podIP": "10.1.0.1",
            "conditions": [{"type": kind, "status": "True" if ready or kind != "Ready" else "False",
                            "lastTransitionTime": STAMP} for kind in ("Initialized", "Ready", "ContainersReady",
                                                                       "PodScheduled")]}


def _pod(name: str, namespace: str, node: str, *, labels: JSON, owner: JSON, spec: JSON, ready: bool = True,
         annotations: JSON | None = None) -> JSON:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}", "labels": labels,
                         "annotations": {"kubectl.kubernetes.io/restartedAt": STAMP, **(annotations or {})},
                         "ownerReferences": [owner], "creationTimestamp": STAMP},
            "spec": {**spec, "nodeName": node, "schedulerName": "default-scheduler", "priority": 0,
                     "serviceAccountName": "default", "restartPolicy": "Always"},
            "status": _status(ready)}


def daemonset_pods(nodes: list[JSON]) -> tuple[list[JSON], list[JSON]]:
    """A node exporter tolerating every taint and kube-proxy (kube-system) on every node."""
    pods: list[JSON] = []
    for ds, namespace in (("node-exporter", "monitoring"), ("kube-proxy", "kube-system")):
        owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds, "uid": f"uid-{ds}", "controller": True}
        spec = {"tolerations": [{"operator": "Exists"}], "containers": [
            {"name": ds, "image": f"example.com/{ds}:1", "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}
        labels = {"app": ds}
        pods += [_pod(f"{ds}-{i}", namespace, n["metadata"]["name"], labels=labels, owner=owner, spec=spec)
                 for i, n in enumerate(nodes)]
    return pods, []


class Fleet:
    """The nodes by what a pod may use: spot and on-demand nodes without a NoSchedule taint and
    not cordoned, by zone."""

    def __init__(self, nodes: list[JSON]) -> None:
        self.spot: list[str] = []
        self.on_demand: list[str] = []
        self.by_zone: dict[str, list[str]] = {}
        for n in nodes:
            meta, spec = n["metadata"], n["spec"]
            if spec.get("unschedulable") or spec.get("taints"):
                continue
            (self.spot if meta["labels"][CAPACITY] == "spot" else self.on_demand).append(meta["name"])
            self.by_zone.setdefault(meta["labels"][ZONE], []).append(meta["name"])


def owner_objects(i: int, replicas: int) -> tuple[str, str, JSON, JSON]:
    """Deployment ``app-<i>`` and its ReplicaSet: (namespace, app, deployment, replicaset)."""
    namespace, app = f"team-{i % 40}", f"app-{i}"
    selector = {"matchLabels": {"app": app}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": app, "namespace": namespace, "uid": f"uid-d-{i}"},
                  "spec": {"replicas": replicas, "selector": selector,
                           "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%",
                                                                                   "maxUnavailable": "25%"}}},
                  "status": {"replicas": replicas, "readyReplicas": replicas}}
    replicaset = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": f"{app}-7d4b9c", "namespace": namespace, "uid": f"uid-rs-{i}",
                               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": app,
                                                    "uid": f"uid-d-{i}", "controller": True}]},
                  "spec": {"replicas": replicas, "selector": selector}, "status": {"replicas": replicas}}
    return namespace, app, deployment, replicaset


def owner_pods(i: int, replicas: int, fleet: Fleet) -> tuple[list[JSON], list[JSON], list[JSON]]:
    """The owner's workloads, pods and budget (if any)."""
    namespace, app, deployment, replicaset = owner_objects(i, replicas)
    interruptible, prefers_zone = i % 10 == 3, i % 25 == 4
    labels = {"app": app, "pod-template-hash": "7d4b9c"}
    cpu = f"{100 + 25 * (i % 5)}m"
    spec: JSON = {"containers": [{"name": "app", "image": f"example.com/{app}:1", "ports": [{"containerPort": 8080}],
                                  "resources": {"requests": {"cpu": cpu, "memory": f"{128 << (i % 3)}Mi"}}}]}
    if prefers_zone:
        spec["affinity"] = {"nodeAffinity": {PREFERRED: [{"weight": 50, "preference": {"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["eu-west-1a"]}]}}]}}
    elif interruptible:  # what admission writes for a ``capacity: spot`` policy
        spec["affinity"] = {"nodeAffinity": {PREFERRED: [{"weight": 100, "preference": {"matchExpressions": [
            {"key": CAPACITY, "operator": "In", "values": ["spot"]}]}}]}}
    annotations = {INTERRUPTIBLE: "true"} if interruptible else None
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replicaset["metadata"]["name"],
             "uid": replicaset["metadata"]["uid"], "controller": True}
    pods = []
    for k in range(replicas):
        node = _node_for(i, k, fleet, interruptible=interruptible, prefers_zone=prefers_zone)
        pods.append(_pod(f"{app}-7d4b9c-{k:05d}", namespace, node, labels=labels, owner=owner, spec=spec,
                         annotations=annotations, ready=not (i % 50 == 7 and k == 1)))
    budgets = []
    if i % 3 == 0 or i % 17 == 0:
        allowed = 0 if i % 17 == 0 else 1
        budgets.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": app, "namespace": namespace},
                        "spec": {"selector": {"matchLabels": {"app": app}}, "maxUnavailable": 1},
                        "status": {"disruptionsAllowed": allowed, "currentHealthy": replicas,
                                   "desiredHealthy": replicas - 1, "expectedPods": replicas}})
    return [deployment, replicaset], pods, budgets


def _node_for(i: int, k: int, fleet: Fleet, *, interruptible: bool, prefers_zone: bool) -> str:
    spread = i * 7919 + k * 104729
    if interruptible:
        pool = fleet.on_demand if k == 0 else fleet.spot
    elif prefers_zone:
        zones = sorted(fleet.by_zone)
        pool = fleet.by_zone[zones[1 + k % 2]] if k < 2 else fleet.by_zone["eu-west-1a"]
    else:
        pool = fleet.on_demand if k % 4 == 0 else fleet.spot
    return pool[spread % len(pool)]


def build(nodes: int, pods: int, owners: int) -> tuple[World, int]:
    """The projected world, and how many pods it holds."""
    node_objs = [make_node(i) for i in range(nodes)]
    fleet = Fleet(node_objs)
    all_pods, _ = daemonset_pods(node_objs)
    per_owner, extra = divmod(max(0, pods - len(all_pods)), owners)
    workloads: list[JSON] = []
    budgets: list[JSON] = []
    for i in range(owners):
        found, owned, budget = owner_pods(i, per_owner + (1 if i < extra else 0), fleet)
        workloads += found
        all_pods += owned
        budgets += budget
    spot = SpotConfig(provider="karpenter")
    share = SharedValues()
    projected = [project_pod(p, spot=spot, share=share) for p in all_pods]
    kinds: dict[str, list[JSON]] = {}
    for w in workloads:
        kinds.setdefault(w["kind"], []).append(project_workload(w))
    world = World(nodes=[project_node(n) for n in node_objs], pods=projected, pdbs=[project_pdb(b) for b in budgets],
                  replicasets=kinds.get("ReplicaSet", []), deployments=kinds.get("Deployment", []),
                  namespaces=[{"metadata": {"name": f"team-{i}", "labels": {"team": f"t{i}"}}} for i in range(40)],
                  now=time.time())
    return world, len(projected)


def timed(run: Callable[[], list[Decision]]) -> tuple[list[Decision], float, float]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    decisions = run()
    return decisions, time.perf_counter() - wall, time.process_time() - cpu


def summary(decisions: list[Decision]) -> str:
    verdicts = Counter(d.verdict.value for d in decisions)
    return ", ".join(f"{verdicts[v.value]} {v.value}" for v in Verdict)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--owners", type=int, default=3000)
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    world, pods = build(args.nodes, args.pods, args.owners)
    print(f"{len(world.nodes):,} nodes, {pods:,} pods of {args.owners:,} Deployments and 2 DaemonSets, "
          f"{len(world.pdbs):,} budgets (built and projected in {time.perf_counter() - start:.1f} s)")
    spot = SpotConfig(provider="karpenter")
    default = Settings(spot=spot)
    decisions, wall, cpu = timed(lambda: plan(world, default))
    candidates = len(decisions)
    why = Counter(d.candidate.why.value for d in decisions)
    print(f"{candidates:,} candidates ({', '.join(f'{n:,} {w}' for w, n in why.most_common())})")
    print(f"default settings (at most {default.max_evictions} moves, {default.max_simulations} simulations): "
          f"{summary(decisions)}; wall {wall:.2f} s, CPU {cpu:.2f} s")
    worst = Settings(spot=spot, max_evictions=max(candidates, 1))
    decisions, wall, cpu = timed(lambda: plan(world, worst))
    ok = cpu < TARGET_SECONDS
    print(f"no limit on moves ({worst.max_simulations} simulations, the slowest pass): {summary(decisions)}; "
          f"wall {wall:.2f} s, CPU {cpu:.2f} s (target < {TARGET_SECONDS:.0f} s of CPU): {'ok' if ok else 'MISSED'}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    gc.collect()
    tracemalloc.start()
    plan(world, worst)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB on Linux
    print(f"memory of a pass: {peak / 2**20:,.0f} MB of Python allocations at its peak (tracemalloc); "
          f"peak RSS grew {grown / 1024:,.0f} MB over the passes, to {before / 1024 + grown / 1024:,.0f} MB "
          "with the world held")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
