"""Audit benchmark: a whole cluster held against the policies, then one Deployment changed.

    python bench/audit_bench.py [--nodes 5000] [--workloads 10000] [--pods 150000] [--check]

It builds a synthetic cluster the way a real fleet looks: the cluster bench's Nodes (3
zones, 5 instance types, dedicated and cordoned nodes), 200 namespaces, and ``--workloads``
workloads, each with its ReplicaSet and its running pods (``--pods`` in all, spread over the
nodes that take them), the pods' specs shared between replicas as ``cluster.snapshot`` shares
them. Most are plain Deployments; one in 200 has required one-per-node anti-affinity (its
rollout is simulated), one in 500 is a StatefulSet, one in 2,000 a DaemonSet, one in 20
opts out of the policies; the policies are the shipped ones (``policies/``).

It prints the time (CPU and wall clock) of a full audit (``Auditor.full``: every policy verdict, every replica
count, every next rollout) and of an incremental pass after one Deployment's template
changed (``Auditor.changed``), the results by status, how many rollouts the shortcut decided,
and the process's peak RSS (what a container limit sees).
Targets (issue 28): full < 60 s and incremental < 1 s at 10,000 workloads, 5,000 nodes and
150,000 pods, peak RSS < 1 GiB, the times as the process's CPU time (on a shared machine the
wall clock counts other processes' turns too). ``--check`` exits 1 when one is missed.
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
from webhook.audit import shortcut
from webhook.audit.scan import Auditor, AuditState, summary
from webhook.kube.kinds import BUILTIN
from webhook.policy import loader

JSON = dict[str, Any]
FULL_TARGET_S, CHANGED_TARGET_S, MEMORY_TARGET_MB = 60.0, 1.0, 1024.0
HOSTNAME = "kubernetes.io/hostname"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
NAMESPACES = 200


def namespace(i: int) -> JSON:
    name = f"team-{i}"
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, "team": f"t{i % 40}"}}}


def kind_of(i: int) -> str:
    if i % 2000 == 7:
        return "DaemonSet"
    if i % 500 == 3:
        return "StatefulSet"
    return "Deployment"


def workload(i: int, replicas: int) -> JSON:
    """The i-th workload: requests, every 200th with required hostname anti-affinity, every 20th
    opted out, every 10th critical (which critical-on-demand selects)."""
    kind, name, app = kind_of(i), f"app-{i}", f"app-{i}"
    labels = {"app": app, **({"placement.novasphere.dev/criticality": "critical"} if i % 10 == 0 else {})}
    spec: JSON = {"containers": [{"name": "app", "image": f"example.com/{app}:1",
                                  "resources": {"requests": {"cpu": f"{50 * (1 + i % 4)}m", "memory": "128Mi"}}}]}
    if kind == "DaemonSet":
        spec["tolerations"] = [{"operator": "Exists"}]  # a node agent: on every node
    if i % 200 == 5:
        spec["affinity"] = {"podAntiAffinity": {REQUIRED: [{"labelSelector": {"matchLabels": {"app": app}},
                                                            "topologyKey": HOSTNAME}]}}
    meta: JSON = {"name": name, "namespace": f"team-{i % NAMESPACES}", "uid": f"uid-{i}", "resourceVersion": "1",
                  "labels": labels}
    if i % 20 == 9:
        meta["annotations"] = {"placement.novasphere.dev/skip": "true"}
    body: JSON = {"selector": {"matchLabels": {"app": app}},
                  "template": {"metadata": {"labels": labels}, "spec": spec}}
    if kind != "DaemonSet":
        body["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": body}


def owned(obj: JSON, kind: str, name: str, extra: JSON | None = None) -> JSON:
    meta = obj["metadata"]
    return {"name": name, "namespace": meta["namespace"], "uid": f"{meta['uid']}-{name}",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": meta["name"], "controller": True}],
            **(extra or {})}


def running(obj: JSON, nodes: list[str], start: int, count: int) -> list[JSON]:
    """The workload's ReplicaSet (a Deployment's) and ``count`` pods, round-robin from ``start``
    over ``nodes``, sharing their template's spec parts as the snapshot's projection does."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    template = obj["spec"]["template"]
    out: list[JSON] = []
    owner_kind, owner_name = kind, name
    labels = dict(template["metadata"]["labels"])
    if kind == "Deployment":
        labels["pod-template-hash"] = "abc123"
        rs_meta = owned(obj, "Deployment", f"{name}-abc123", {"labels": labels})
        out.append({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": rs_meta,
                    "spec": {"replicas": count, "selector": {"matchLabels": labels}, "template": template}})
        owner_kind, owner_name = "ReplicaSet", f"{name}-abc123"
    spec = template["spec"]
    refs = [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner_name, "controller": True}]
    for j in range(count):
        pod_name = f"{name}-{j}" if kind == "StatefulSet" else f"{owner_name}-{j:05d}"
        node = nodes[(start + j) % len(nodes)]
        if kind == "DaemonSet":
            pod_name, node = f"{name}-{node}", nodes[j]
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod_name, "namespace": obj["metadata"]["namespace"], "labels": labels,
                                 "uid": f"pod-{name}-{j}", "ownerReferences": refs},
                    "spec": {**spec, "nodeName": node}, "status": {"phase": "Running"}})
    return out


def build(nodes: int, workloads: int, pods: int) -> list[JSON]:
    node_objs = [make_node(i) for i in range(nodes)]
    # Plain pods run where nothing keeps them off: no taint, no cordon (the daemons tolerate all).
    open_nodes = [n["metadata"]["name"] for n in node_objs
                  if not n["spec"].get("taints") and not n["spec"].get("unschedulable")]
    objects: list[JSON] = [*node_objs, *(namespace(i) for i in range(NAMESPACES))]
    daemons = sum(1 for i in range(workloads) if kind_of(i) == "DaemonSet")
    per, extra = divmod(max(0, pods - daemons * nodes), max(1, workloads - daemons))
    placed = 0
    for i in range(workloads):
        obj = workload(i, (per + (i < extra)) if i % 200 != 5 else 3)
        objects.append(obj)
        if obj["kind"] == "DaemonSet":
            objects += running(obj, [n["metadata"]["name"] for n in node_objs], 0, len(node_objs))
            continue
        count = obj["spec"]["replicas"]
        objects += running(obj, open_nodes, placed, count)
        placed += count
    return objects


def measure(nodes: int, workloads: int, pods: int) -> dict[str, Any]:
    policies = loader.load_with_sources([str(ROOT / "policies")], targets=BUILTIN, each=True).policies
    gc.collect()
    start = time.perf_counter()
    objects = build(nodes, workloads, pods)
    generated = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    state = AuditState.from_objects(objects, targets=BUILTIN)
    del objects
    decided = _count_shortcuts()
    auditor = Auditor(policies)
    results = auditor.full(state)
    full, full_cpu = time.perf_counter() - start, time.process_time() - cpu
    shortcut_hits = decided()
    changed = dict(state.objects["Deployment/team-1/app-1"])
    template = changed["spec"]["template"]
    spec = {**template["spec"], "containers": [{**template["spec"]["containers"][0], "image": "example.com/app-1:2"}]}
    changed = {**changed, "metadata": {**changed["metadata"], "resourceVersion": "2"},
               "spec": {**changed["spec"], "template": {**template, "spec": spec}}}
    start, cpu = time.perf_counter(), time.process_time()
    after = auditor.changed(state.replaced([changed]), ["uid-1"])
    incremental, incremental_cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"generated": generated, "full": full, "full_cpu": full_cpu, "changed": incremental,
            "changed_cpu": incremental_cpu, "results": summary(results),
            "after": len(after), "workloads": len({r.resource for r in results}), "pods": len(state.pods.node_of),
            "shortcut": shortcut_hits, "peak": peak}


def _count_shortcuts() -> Any:
    """Count the rollouts the shortcut decides and those it leaves to the simulation (wrapping
    ``shortcut``'s two functions for the run)."""
    hits = [0, 0]
    originals = {name: getattr(shortcut, name) for name in ("rollout_completes", "ordered_update_completes")}

    def counting(original: Any) -> Any:
        def count(*args: Any, **kwargs: Any) -> Any:
            found = original(*args, **kwargs)
            hits[found is None] += 1
            return found
        return count

    for name, original in originals.items():
        setattr(shortcut, name, counting(original))

    def done() -> tuple[int, int]:
        for name, original in originals.items():
            setattr(shortcut, name, original)
        return hits[0], hits[1]

    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workloads", type=int, default=10000)
    parser.add_argument("--pods", type=int, default=150000)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    m = measure(args.nodes, args.workloads, args.pods)
    # The targets are held to the process's CPU time: on a shared machine the wall clock also
    # counts the other processes' turns (both are printed).
    full_ok, changed_ok = m["full_cpu"] < FULL_TARGET_S, m["changed_cpu"] < CHANGED_TARGET_S
    mem_ok = m["peak"] < MEMORY_TARGET_MB
    decided, simulated = m["shortcut"]
    print(f"{args.workloads:,} workloads, {args.nodes:,} nodes, {m['pods']:,} bound pods "
          f"(generated in {m['generated']:.1f} s)")
    print(f"full audit: {m['full_cpu']:.2f} s of CPU, {m['full']:.2f} s wall (target < {FULL_TARGET_S:.0f} s): "
          f"{'ok' if full_ok else 'MISSED'}; "
          f"{m['workloads']:,} workloads audited; " + ", ".join(f"{n:,} {s}" for s, n in m["results"].items()))
    print(f"rollouts: {decided:,} decided by the shortcut, {simulated:,} simulated")
    print(f"incremental pass after one Deployment changed: {m['changed_cpu'] * 1000:.0f} ms of CPU, "
          f"{m['changed'] * 1000:.0f} ms wall "
          f"(target < {CHANGED_TARGET_S * 1000:.0f} ms): {'ok' if changed_ok else 'MISSED'}; {m['after']:,} results")
    print(f"peak RSS {m['peak']:,.0f} MB (target < {MEMORY_TARGET_MB:,.0f} MB): {'ok' if mem_ok else 'MISSED'}")
    return 1 if args.check and not (full_ok and changed_ok and mem_ok) else 0


if __name__ == "__main__":
    sys.exit(main())
