"""Spot controller benchmark: how fast a reclaim signal turns into evictions, and what a drain costs.

    python bench/spot_bench.py [--pods 110] [--daemonsets 5] [--drain-timeout 30] [--latency 0.005]
                               [--parallel-evictions 10] [--check]

Starts the fake API server (tests.kit.fakeapi, with its disruption controller) in a child
process, answering every request ``--latency`` seconds late (5 ms: a real API server's round
trip), loaded with a spot node holding ``--pods`` pods (a full node: the kubelet's default
limit is 110), ``--daemonsets`` of them DaemonSet pods and the rest in Deployment-like groups
(each a ReplicaSet of its own, pods as kubelets report them: containers, probes, volumes,
conditions, managedFields) under a mix of PodDisruptionBudgets: groups with none, groups with
``maxUnavailable: 1``, groups with ``minAvailable`` equal to their count minus 2, and one group
whose budget never allows an eviction (``minAvailable`` equal to its count); and three on-demand
nodes. The child also plays the ReplicaSet controller, the scheduler and the kubelet: every pod
evicted from the spot node is replaced ``--replace-delay`` seconds later by a Ready pod of the
same group on an on-demand node, which the disruption controller counts at once, so every budget
but the one that never allows an eviction lets the drain through in time. Its own CPU is not the
controller's, which is why it runs in another process.

This process runs the spot controller as ``placement-webhook spot-controller`` does (the same
cluster view, projections and settings; ``SpotController.run``). Once it has synced, the child
writes the spot-itn taint of aws-node-termination-handler on the spot node, and the bench prints:
- the time from the taint write to the first eviction request arriving at the API server (both
  timestamps taken in the server's process);
- the time from the taint write until the last pod a budget allows was evicted (every pod but
  the DaemonSet pods and the group whose budget allows none), at the API server: the drain's
  wall time where budgets allow;
- the controller's CPU time (``time.process_time()`` of this process: the controller, its
  informers and HTTP client; the server's CPU is the child's) from the taint write until the
  drain ends, divided by the pods evicted. Because one budget never allows an eviction, the
  drain runs to its deadline (``--drain-timeout``), retrying those pods with the controller's
  backoff; the CPU of those retries, of the blocked answers, the Events and the watch events of
  the replacements is all counted, and divided by the evicted pods only;
- the evictions by result (the controller's ``placement_webhook_spot_evictions`` counter) and
  the API server's answers to them.
Targets (issue 26): the first eviction within 100 ms of the taint, every pod a budget allows
evicted within 3 s, under 1 ms of controller CPU per evicted pod. ``--check`` exits 1 when one
is missed. The figures are wall and CPU times on whatever machine runs it: on a shared one,
take the median of several runs.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: the checkout's webhook and tests.kit packages

FIRST_EVICTION_TARGET = 0.1  # seconds from the taint write
DRAINED_TARGET = 3.0  # seconds from the taint write until every pod a budget allows is evicted
CPU_TARGET_MS = 1.0  # controller CPU per evicted pod
READY = "fake API server ready"
JSON = dict[str, Any]

SPOT_NODE = "spot-1"
ON_DEMAND = ("od-1", "od-2", "od-3")
NAMESPACE = "shop"
CAPACITY_LABEL = "node.kubernetes.io/capacity"  # the generic provider's (SpotConfig's default)
SPOT_ITN = {"key": "aws-node-termination-handler/spot-itn", "value": "spot-interruption", "effect": "NoSchedule"}
STAMP = "2024-05-01T10:00:00Z"
DAEMONSETS = ("kube-proxy", "aws-node", "ebs-csi-node", "node-exporter", "fluent-bit", "istio-cni", "dcgm-exporter")

# --- the workload -------------------------------------------------------------------------------

NONE, MAX1, MIN_N2, NEVER = "no budget", "maxUnavailable 1", "minAvailable n-2", "no eviction allowed"
# Group sizes per kind, in turn. A maxUnavailable-1 group drains one pod per backoff step of the
# controller (1, 2, 4, 8 s...), so those groups stay small enough to drain well within 30 s.
SIZES = {NONE: (6, 8, 5), MAX1: (4, 5, 3), MIN_N2: (8, 6, 10)}
NEVER_SIZE = 3


@dataclass(frozen=True)
class Group:
    name: str
    kind: str
    size: int

    def budget(self) -> JSON | None:
        spec: JSON = {"selector": {"matchLabels": {"app": self.name}}}
        if self.kind == NONE:
            return None
        if self.kind == MAX1:
            spec["maxUnavailable"] = 1
        elif self.kind == MIN_N2:
            spec["minAvailable"] = max(0, self.size - 2)
        else:
            spec["minAvailable"] = self.size
        return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": self.name, "namespace": NAMESPACE, "generation": 1}, "spec": spec}


def groups(workload: int) -> list[Group]:
    """The Deployment-like groups holding ``workload`` pods: one that allows no eviction, then
    no budget, maxUnavailable 1 and minAvailable n-2 in turn (the last group takes what is left)."""
    never = min(NEVER_SIZE, workload)
    out = [Group("ledger", NEVER, never)] if never else []
    left, turn = workload - never, 0
    kinds = (NONE, MAX1, MIN_N2)
    while left > 0:
        kind = kinds[turn % 3]
        size = min(SIZES[kind][(turn // 3) % 3], left)
        out.append(Group(f"svc-{turn}", kind, size))
        left -= size
        turn += 1
    return out


def _uid(name: str) -> str:
    digits = f"{zlib.crc32(name.encode()):08x}{len(name):04x}"
    return f"5e1f0c2a-{digits[:4]}-4{digits[4:7]}-8{digits[7:10]}-{digits}"


def replicaset(group: Group) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{group.name}-7d9f8b6c5d", "namespace": NAMESPACE, "uid": _uid(group.name),
                         "labels": {"app": group.name, "pod-template-hash": "7d9f8b6c5d"}},
            "spec": {"replicas": group.size, "selector": {"matchLabels": {"app": group.name}}},
            "status": {"replicas": group.size, "readyReplicas": group.size}}


def _conditions(ready: bool = True) -> list[JSON]:
    state = "True" if ready else "False"
    return [{"type": kind, "status": "True" if kind == "PodScheduled" else state, "lastProbeTime": None,
             "lastTransitionTime": STAMP} for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]


def make_pod(name: str, app: str, node: str, owner: JSON, *, namespace: str = NAMESPACE, index: int = 0) -> JSON:
    """A running, Ready pod as the API server holds it once a kubelet has reported on it."""
    image = f"registry.example.com/{app}:1.{index % 9}.0"
    container = {
        "name": "app", "image": image, "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": "APP", "value": app}, {"name": "POD_NAME", "valueFrom": {"fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.name"}}}],
        "resources": {"requests": {"cpu": f"{50 * (1 + index % 6)}m", "memory": f"{64 * (1 + index % 5)}Mi"},
                      "limits": {"memory": f"{128 * (1 + index % 5)}Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http", "scheme": "HTTP"}, "periodSeconds": 5,
                           "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
        "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                          "readOnly": True}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    managed: list[JSON] = [{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": STAMP,
                            "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}
                           for manager in ("kube-controller-manager", "kubelet")]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app, "pod-template-hash": "7d9f8b6c5d"},
                     "annotations": {"kubectl.kubernetes.io/restartedAt": STAMP}, "ownerReferences": [owner],
                     "managedFields": managed},
        "spec": {"nodeName": node, "containers": [container], "serviceAccountName": "default",
                 "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                 "schedulerName": "default-scheduler", "priority": 0, "enableServiceLinks": True,
                 "preemptionPolicy": "PreemptLowerPriority",
                 "tolerations": [{"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": 300} for t in ("not-ready", "unreachable")],
                 "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                     {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                     {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]},
        "status": {"phase": "Running", "conditions": _conditions(), "hostIP": "10.0.0.10",
                   "podIP": f"10.1.{index // 250}.{index % 250 + 2}", "startTime": STAMP, "qosClass": "Burstable",
                   "containerStatuses": [{"name": "app", "ready": True, "started": True, "restartCount": 0,
                                          "image": image, "imageID": f"{image}@sha256:{index:064x}",
                                          "containerID": f"containerd://{index:064x}",
                                          "state": {"running": {"startedAt": STAMP}}, "lastState": {}}]}}


def rs_owner(group: Group) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{group.name}-7d9f8b6c5d",
            "uid": _uid(group.name), "controller": True, "blockOwnerDeletion": True}


def make_node(name: str, capacity: str) -> JSON:
    from bench.cluster_bench import make_node as realistic

    node = realistic(zlib.crc32(name.encode()) % 1000 * 10 + 3)  # a realistic Node: labels, conditions, images
    node["metadata"]["name"] = name
    node["metadata"]["labels"].update({"kubernetes.io/hostname": name, CAPACITY_LABEL: capacity,
                                       "karpenter.sh/capacity-type": capacity})
    node["spec"]["taints"], node["spec"]["unschedulable"] = [], False
    return node


def cluster_objects(pods: int, daemonsets: int) -> tuple[list[JSON], list[Group]]:
    daemonsets = min(daemonsets, pods, len(DAEMONSETS))
    found = groups(pods - daemonsets)
    objects: list[JSON] = [make_node(SPOT_NODE, "spot"), *(make_node(n, "on-demand") for n in ON_DEMAND)]
    objects += [replicaset(g) for g in found]
    index = 0
    for name in DAEMONSETS[:daemonsets]:
        owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": _uid(name), "controller": True,
                 "blockOwnerDeletion": True}
        objects.append(make_pod(f"{name}-x7k2p", name, SPOT_NODE, owner, namespace="kube-system", index=index))
        index += 1
    for group in found:
        for i in range(group.size):
            objects.append(make_pod(f"{group.name}-7d9f8b6c5d-{i:05d}", group.name, SPOT_NODE, rs_owner(group),
                                    index=index))
            index += 1
    objects += [b for g in found if (b := g.budget()) is not None]
    return objects, found


# --- the fake API server, in its own process ----------------------------------------------------


@dataclass
class ServerStats:
    tainted: float = 0.0
    first_eviction: float = 0.0
    last_evicted: float = 0.0
    answers: Counter[int] = field(default_factory=Counter)
    replaced: int = 0


async def _serve_api(args: argparse.Namespace) -> None:
    """Child process: load the cluster, serve, say so on stdout; then act on the parent's
    commands (``taint``, ``report``) until its stdin closes."""
    from tests.kit.fakeapi import ApiError, FakeApiServer
    from tests.kit.fakeapi.discovery import PODS

    objects, found = cluster_objects(args.pods, args.daemonsets)
    owners = {g.name: rs_owner(g) for g in found}
    server = FakeApiServer("1.31.0", pdb_controller=True, record_requests=False)
    server.latency = args.latency
    server.load(objects)
    server.sync_pdbs()
    stats = ServerStats()
    loop = asyncio.get_running_loop()

    original = server.app._evict

    def evict(*a: Any) -> Any:  # the eviction subresource, timed as requests arrive
        now = time.time()
        stats.first_eviction = stats.first_eviction or now
        try:
            answer = original(*a)
        except ApiError as exc:
            stats.answers[exc.code] += 1
            raise
        stats.answers[answer.status] += 1
        stats.last_evicted = now
        return answer

    server.app._evict = evict  # type: ignore[method-assign,assignment]

    def replace(prev: JSON) -> None:
        app = prev["metadata"]["labels"]["app"]
        node = ON_DEMAND[stats.replaced % len(ON_DEMAND)]
        server.apply_object(make_pod(f"{prev['metadata']['name']}-r", app, node, owners[app], index=stats.replaced))
        stats.replaced += 1

    def on_write(res: Any, prev: JSON | None, new: JSON | None) -> None:
        """The ReplicaSet controller, scheduler and kubelet: a pod of a group gone from the spot
        node comes back, Ready, on an on-demand node."""
        if res is PODS and new is None and prev is not None and (prev.get("spec") or {}).get("nodeName") == SPOT_NODE \
                and (prev["metadata"].get("labels") or {}).get("app") in owners:
            loop.call_later(args.replace_delay, replace, prev)

    server.registry.after_write.append(on_write)
    await server.start()
    server.write_kubeconfig(args.kubeconfig)
    print(READY, flush=True)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().strip():
        if line == "taint":
            server.patch_object("Node", SPOT_NODE, {"spec": {"taints": [SPOT_ITN]}})
            stats.tainted = time.time()  # stored: every watcher is notified from here
            print(json.dumps({"tainted": stats.tainted}), flush=True)
        elif line == "report":
            print(json.dumps({"tainted": stats.tainted, "first_eviction": stats.first_eviction,
                              "last_evicted": stats.last_evicted, "answers": dict(stats.answers),
                              "replaced": stats.replaced, "cpu": time.process_time(),
                              "events": Counter(e.get("reason") for ns in ("default", "kube-system", NAMESPACE)
                                                for e in server.list_objects("Event", ns))}), flush=True)
    await server.stop()


class Child:
    """The fake API server's process and its command channel."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, kubeconfig: Path, args: argparse.Namespace) -> Child:
        argv = [sys.executable, __file__, "--serve-api", "--kubeconfig", str(kubeconfig), "--pods", str(args.pods),
                "--daemonsets", str(args.daemonsets), "--replace-delay", str(args.replace_delay),
                "--latency", str(args.latency)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, cwd=ROOT, env=env)
        assert proc.stdout is not None
        line = (await proc.stdout.readline()).decode().strip()  # loaded and listening, or dead
        if line != READY:
            raise SystemExit(f"fake API server did not start (exit {await proc.wait()})")
        return cls(proc)

    async def ask(self, command: str) -> JSON:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{command}\n".encode())
        await self.proc.stdin.drain()
        answer: JSON = json.loads(await self.proc.stdout.readline())
        return answer

    async def stop(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


# --- the measured controller --------------------------------------------------------------------


@dataclass
class Figures:
    pods: int
    groups: list[Group]
    first_eviction: float  # seconds after the taint, at the API server
    first_call: float  # seconds after the taint, when the controller called evict()
    last_evicted: float  # seconds after the taint
    drain_seconds: float
    cpu_seconds: float
    evicted: int
    results: dict[str, int]
    answers: dict[str, int]
    replaced: int
    kept: list[str]
    server_cpu: float
    events: dict[str, int]


async def measure(args: argparse.Namespace, kubeconfig: Path) -> Figures:
    from webhook.cluster import config as cluster_config
    from webhook.cluster.cache import NODES, ClusterCache
    from webhook.cluster.client import Client
    from webhook.spot.config import SpotConfig
    from webhook.spot.controller import (
        CORDONED_BY,
        DRAIN_STARTED,
        SpotController,
        SpotSettings,
    )
    from webhook.spot.nodes import node_projection

    child = await Child.start(kubeconfig, args)
    try:
        # As ``placement-webhook spot-controller --kubeconfig FILE --drain-timeout N`` builds it.
        client = Client(cluster_config.load(str(kubeconfig)))
        spot = SpotConfig()
        cache = ClusterCache(client, projections={NODES: node_projection(spot, (DRAIN_STARTED, CORDONED_BY))})
        settings = SpotSettings(drain_timeout=args.drain_timeout, backoff=args.backoff, max_backoff=args.max_backoff,
                                parallel_evictions=args.parallel_evictions)
        controller = SpotController(client, cache, spot, settings)
        calls: list[float] = []
        evict = controller.evictor.evict

        async def timed(pod: Any) -> tuple[str, str]:
            if not calls:
                calls.append(time.time())
            return await evict(pod)

        controller.evictor.evict = timed  # type: ignore[method-assign]
        await cache.start()
        if not await cache.wait_synced(60.0):
            raise SystemExit(f"the controller's cluster view did not sync: {cache.status()}")
        pods = len(controller.pods.assigned_to(SPOT_NODE))
        stop = asyncio.Event()
        runner = asyncio.create_task(controller.run(stop))
        await asyncio.sleep(0.3)  # its first round: nothing to drain yet
        gc.collect()
        cpu = time.process_time()
        began = time.perf_counter()
        tainted = float((await child.ask("taint"))["tainted"])
        while SPOT_NODE not in controller.drains and time.perf_counter() - began < 30:
            await asyncio.sleep(0.005)
        if SPOT_NODE not in controller.drains:
            raise SystemExit("the controller did not start draining the tainted node within 30 s")
        drain = controller.drains[SPOT_NODE]
        await drain.task  # to the end of the drain: all gone, or its deadline
        cpu = time.process_time() - cpu
        drain_seconds = time.perf_counter() - began
        report = drain.report
        stop.set()
        await runner
        await cache.stop()
        await client.close()
        server = await child.ask("report")
    finally:
        await child.stop()
    results = {label: int(controller.metrics.evictions.labels(label)._value.get())
               for label in ("evicted", "gone", "blocked", "failed", "retry")}
    return Figures(pods=pods, groups=groups(args.pods - min(args.daemonsets, args.pods, len(DAEMONSETS))),
                   first_eviction=server["first_eviction"] - tainted if server["first_eviction"] else float("nan"),
                   first_call=calls[0] - tainted if calls else float("nan"),
                   last_evicted=server["last_evicted"] - tainted if server["last_evicted"] else float("nan"),
                   drain_seconds=drain_seconds, cpu_seconds=cpu, evicted=len(report.evicted), results=results,
                   answers={str(k): v for k, v in sorted(server["answers"].items())}, replaced=server["replaced"],
                   kept=sorted(report.blocked), server_cpu=server["cpu"],
                   events=dict(sorted(server["events"].items())))


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report(figures: Figures, args: argparse.Namespace) -> bool:
    """Print every figure beside its target; whether every target was met."""
    kinds = Counter(g.kind for g in figures.groups)
    daemonsets = min(args.daemonsets, args.pods, len(DAEMONSETS))
    print(f"spot node with {figures.pods} pods: {daemonsets} DaemonSet pods and {len(figures.groups)} Deployment-like "
          f"groups ({kinds[NONE]} with no budget, {kinds[MAX1]} maxUnavailable 1, {kinds[MIN_N2]} minAvailable n-2, "
          f"{kinds[NEVER]} allowing no eviction); fake API server in a child process, replacing each evicted pod "
          f"on an on-demand node {args.replace_delay:g} s later")
    first_ok = figures.first_eviction < FIRST_EVICTION_TARGET
    print(f"taint to first eviction request: {figures.first_eviction * 1000:.1f} ms at the API server "
          f"(the controller called evict {figures.first_call * 1000:.1f} ms after the taint) "
          f"(target < {FIRST_EVICTION_TARGET * 1000:g} ms): {_verdict(first_ok)}")
    allowed = figures.pods - daemonsets - never_allowed(figures.groups)
    drained_ok = figures.evicted == allowed and figures.last_evicted < DRAINED_TARGET
    print(f"drained where budgets allow: {figures.evicted} of the {allowed} pods a budget allows evicted, the last "
          f"{figures.last_evicted:.2f} s after the taint (target: all, < {DRAINED_TARGET:g} s; "
          f"{args.latency * 1000:g} ms per API call, at most {args.parallel_evictions} evictions in flight): "
          f"{_verdict(drained_ok)}")
    per_pod = figures.cpu_seconds / figures.evicted * 1000 if figures.evicted else float("inf")
    cpu_ok = per_pod < CPU_TARGET_MS
    print(f"controller CPU per evicted pod: {per_pod:.2f} ms (target < {CPU_TARGET_MS:g} ms): {_verdict(cpu_ok)}; "
          f"{figures.cpu_seconds * 1000:.0f} ms of CPU over the {figures.drain_seconds:.1f} s drain, "
          f"{figures.evicted} pods evicted")
    print("evictions by result: " + ", ".join(f"{k} {v}" for k, v in figures.results.items())
          + "; the API server answered " + ", ".join(f"{v} x {k}" for k, v in figures.answers.items())
          + "; Events written: " + (", ".join(f"{k} {v}" for k, v in figures.events.items()) or "none"))
    kept = f"{len(figures.kept)} pod(s) kept by a budget at the deadline" if figures.kept else "nothing kept"
    print(f"drain: {kept} (--drain-timeout {args.drain_timeout:g} s, backoff {args.backoff:g}-{args.max_backoff:g} s); "
          f"{figures.replaced} replacements; the fake API server used {figures.server_cpu:.2f} s of CPU (not counted)")
    return first_ok and drained_ok and cpu_ok


def never_allowed(found: list[Group]) -> int:
    """The pods of the group whose budget never allows an eviction."""
    return sum(g.size for g in found if g.kind == NEVER)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=110, help="pods on the spot node, DaemonSet pods included")
    parser.add_argument("--daemonsets", type=int, default=5, help=f"DaemonSet pods among them (at most {len(DAEMONSETS)})")
    parser.add_argument("--drain-timeout", type=float, default=30.0, help="the controller's --drain-timeout")
    parser.add_argument("--backoff", type=float, default=1.0, help="first retry of a blocked eviction (the default)")
    parser.add_argument("--max-backoff", type=float, default=10.0, help="longest retry interval (the default)")
    parser.add_argument("--replace-delay", type=float, default=0.2,
                        help="seconds from an eviction until its replacement is Ready elsewhere")
    parser.add_argument("--latency", type=float, default=0.005,
                        help="seconds the API server adds to every request: the network's round trip")
    parser.add_argument("--parallel-evictions", type=int, default=10,
                        help="evictions in flight at once (the controller's default)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--serve-api", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_api:
        asyncio.run(_serve_api(args))
        return 0
    import logging

    logging.getLogger("webhook").setLevel(logging.ERROR)  # the deadline's warning is expected here
    with tempfile.TemporaryDirectory(prefix="spot-bench-") as tmp:
        ok = report(asyncio.run(measure(args, Path(tmp) / "kubeconfig")), args)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
