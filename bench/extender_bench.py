"""Scheduler extender benchmark: filter and prioritize latency under a fixed request rate.

    python bench/extender_bench.py [--nodes-cache 5000] [--nodes-objects 1000] [--rate 50]
                                   [--rate-objects RATE] [--duration 10] [--check] [--profile FILE]

The extender (``webhook.extender.app.make_app``, the real aiohttp app) serves in a child process,
as it runs beside kube-scheduler, on a loopback port. Its cluster view is a static object holding
``--nodes-cache`` node projections (``spot.nodes.node_projection``, what ``placement-webhook
extender`` keeps of each Node) of the cluster view bench's Nodes, with the capacity label
``node.kubernetes.io/capacity: spot|on-demand`` (one node in four on demand), five instance types
priced in the SpotConfig's price table (cost factor 0.3), and about 2% of the spot nodes about to
be reclaimed (spot-itn and Karpenter disruption taints, a spot node NotReady for long, a
configured label and annotation).

This process is the scheduler: an aiohttp client sending what ``HTTPExtender.send``
(pkg/scheduler/extender.go) sends, JSON POSTs of ``ExtenderArgs`` with the Go field names, at a
fixed rate whatever the answers' latency (an open loop: a slow answer does not slow the load
down). Each simulated pod is a filter, then a prioritize of the nodes the filter passed, as one
scheduling cycle calls them; pods come at ``--rate``/2 per second, so ``--rate`` requests per second
(``--rate-objects``, default 10, in Nodes mode: kube-scheduler runs one scheduling cycle at a
time and waits for each answer, and a cycle that ships 6 MiB of Nodes each way takes tens of
milliseconds on the wire and in the scheduler alone, so it cannot send whole-Node requests much
faster; pass ``--rate-objects 50`` to see where one extender process saturates).
The pods are a mix of what a fleet schedules: plain, interruptible (annotation, spot node
affinity), critical (priority, annotation). Two modes, one after the other:

- ``nodeCacheCapable: true``: ``NodeNames`` holds every one of the ``--nodes-cache`` nodes, the
  extender reads them in its view. Target: p99 under 20 ms per verb.
- ``nodeCacheCapable: false``: ``Nodes`` holds ``--nodes-objects`` whole Node objects (~6 KB
  each, as the scheduler's cache has them), and a filter answer carries the passed ones back.
  Target: p99 under 150 ms per verb.

Latency is measured here, from sending a request to having read its whole answer. It prints,
per mode and verb, the p50, p99 and max latency, the requests sent and failed and the mean time
in the extender's handler (its own request-duration histogram: from awaiting the body to the
answer built, so a saturated event loop shows there too), then the rate achieved and whether the
targets hold (ok or MISSED; the rate must reach 90% of ``--rate``, and
no request may fail). ``--check`` exits 1 when one is missed; ``--profile FILE`` runs the
server under cProfile and prints where its time went.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import math
import os
import pstats
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_bench import INSTANCE_TYPES, STAMP, make_node
from webhook import codec

JSON = dict[str, Any]
READY = "extender ready on port"
CAPACITY = "node.kubernetes.io/capacity"
TARGETS_MS = {"names": 20.0, "objects": 150.0}  # p99 per verb
METRIC = "placement_webhook_extender_request_duration_seconds"
RATE_SHARE = 0.9  # the load generator must reach this share of --rate
CRITICAL_CLASS, CRITICAL_VALUE = "platform-critical", 2_000_000_000
# On-demand and spot hourly prices of the fleet's instance types; g5.2xlarge spot is unpriced
# (a node without a price scores the neutral 5 on cost).
PRICES = {"m6i.2xlarge": (0.384, 0.131), "m6i.4xlarge": (0.768, 0.262), "c6i.8xlarge": (1.36, 0.52),
          "r6i.4xlarge": (1.008, 0.33), "g5.2xlarge": (1.212, None)}
CONFIG: JSON = {
    "apiVersion": "placement.novasphere.dev/v1alpha1", "kind": "SpotConfig",
    "reclaim": {"labels": {"example.com/state": "draining"}, "annotations": {"example.com/reclaim-at": ""},
                "notReadySeconds": 120},
    "cost": {"factor": 0.3, "prices": [
        {"instanceType": itype, "capacity": kind, "hourly": price}
        for itype, (on_demand, spot) in PRICES.items()
        for kind, price in (("on-demand", on_demand), ("spot", spot)) if price is not None]},
}
assert set(PRICES) == set(INSTANCE_TYPES)


# --- the fleet and the pods ------------------------------------------------------------------------


def fleet_node(i: int) -> JSON:
    """The cluster view bench's Node ``i`` as a spot or on-demand node; some spot nodes are about
    to be reclaimed, each by one of the signals the detector reads."""
    node = make_node(i)
    labels = node["metadata"]["labels"]
    kind = "spot" if i % 4 else "on-demand"  # the same as its karpenter.sh/capacity-type
    labels[CAPACITY] = kind
    if kind == "spot":
        if i % 100 == 3:
            node["spec"]["taints"].append({"key": "aws-node-termination-handler/spot-itn", "effect": "NoSchedule",
                                           "timeAdded": STAMP})
        elif i % 250 == 9:
            node["spec"]["taints"].append({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"})
        elif i % 500 == 5:
            ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
            ready.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.",
                         lastTransitionTime=STAMP)
        elif i % 1000 == 17:
            node["metadata"]["annotations"]["example.com/reclaim-at"] = STAMP
        elif i % 1000 == 21:
            labels["example.com/state"] = "draining"
    return node


def scheduler_node(i: int) -> JSON:
    """Node ``i`` as the scheduler marshals it into ``ExtenderArgs.Nodes.items``: objects from
    its informer cache carry no apiVersion and kind."""
    node = fleet_node(i)
    del node["apiVersion"], node["kind"]
    return node


def spot_config() -> Any:
    from webhook.spot.config import SpotConfig

    return SpotConfig.model_validate(CONFIG)


class StaticView:
    """The cluster view the extender reads (``NodeSource``): a fixed tuple of projections, as
    ``ClusterCache.nodes()`` returns it between node changes."""

    def __init__(self, nodes: int, config: Any) -> None:
        from webhook.cluster.cache import project_priority_class
        from webhook.spot.nodes import node_projection

        project = node_projection(config)
        self._nodes = tuple(project(fleet_node(i)) for i in range(nodes))
        self._classes = {CRITICAL_CLASS: project_priority_class({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": CRITICAL_CLASS},
            "value": CRITICAL_VALUE, "description": "Platform components."})}

    def nodes(self) -> tuple[Mapping[str, Any], ...]:
        return self._nodes

    def priority_class(self, name: str) -> Mapping[str, Any] | None:
        return self._classes.get(name)

    def reclaimed(self, detector: Any, now: float) -> int:
        return sum(1 for n in self._nodes if detector.reclaim(n, now) is not None)


def pod(i: int) -> JSON:
    """A Deployment's pod as the scheduler's informer has it (Priority admission has set
    ``spec.priority``): one of six kinds, by ``i``."""
    kind = ("web", "batch", "platform", "spot-affine", "ingest", "api")[i % 6]
    annotations = {"kubectl.kubernetes.io/restartedAt": STAMP}
    spec: JSON = {
        "schedulerName": "default-scheduler", "priority": 0, "enableServiceLinks": True,
        "serviceAccountName": kind, "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always", "preemptionPolicy": "PreemptLowerPriority",
        "securityContext": {"runAsNonRoot": True, "fsGroup": 2000},
        "containers": [{
            "name": kind, "image": f"example.com/team/{kind}:1.{i % 9}.0", "imagePullPolicy": "IfNotPresent",
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "env": [{"name": f"SETTING_{n}", "value": f"value-{n}"} for n in range(8)],
            "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http", "scheme": "HTTP"},
                               "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
            "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                              "readOnly": True}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
        "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300},
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
    }
    if kind == "batch":
        annotations["placement.novasphere.dev/interruptible"] = "true"
    elif kind == "platform":
        spec.update(priorityClassName=CRITICAL_CLASS, priority=CRITICAL_VALUE)
    elif kind == "spot-affine":
        spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 50, "preference": {"matchExpressions": [{"key": CAPACITY, "operator": "In", "values": ["spot"]}]}}]
    elif kind == "ingest":
        annotations["placement.novasphere.dev/critical"] = "true"
    suffix = f"{i:05x}"
    return {"metadata": {
        "name": f"{kind}-7d9f8b6c5d-{suffix}", "generateName": f"{kind}-7d9f8b6c5d-", "namespace": f"team-{i % 40}",
        "uid": f"{i:08x}-0000-4000-8000-{i:012x}", "resourceVersion": str(100000 + i),
        "creationTimestamp": STAMP, "labels": {"app": kind, "pod-template-hash": "7d9f8b6c5d"},
        "annotations": annotations,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{kind}-7d9f8b6c5d",
                             "uid": f"{i % 6:08x}-0000-4000-8000-000000000000", "controller": True,
                             "blockOwnerDeletion": True}]},
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "Burstable"}}


def node_names(count: int) -> list[str]:
    return [make_node(i)["metadata"]["name"] for i in range(count)]


# --- the extender, in its own process ---------------------------------------------------------------


async def _serve(nodes: int, profile: str | None) -> None:
    """Child process: build the view and the app, listen on a free loopback port, say which on
    stdout, serve until SIGTERM (then write the profile)."""
    from aiohttp import web

    from webhook.extender.app import Extender, make_app

    config = spot_config()
    view = StaticView(nodes, config)
    extender = Extender(config, view=view)
    runner = web.AppRunner(make_app(extender), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    profiler = cProfile.Profile() if profile else None
    print(f"{READY} {port}; {len(view.nodes())} nodes in the view, "
          f"{view.reclaimed(extender.detector, time.time())} about to be reclaimed", flush=True)
    if profiler is not None:
        profiler.enable()
    await stop.wait()
    if profiler is not None and profile:
        profiler.disable()
        profiler.dump_stats(profile)
    await runner.cleanup()


@contextlib.contextmanager
def extender_process(nodes: int, profile: str | None) -> Iterator[tuple[int, str]]:
    """The extender in a child process until the block ends: (its port, what it said)."""
    argv = [sys.executable, __file__, "--serve", "--nodes-cache", str(nodes)]
    if profile:
        argv += ["--profile", profile]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until it listens, or the child died
        if not line.startswith(READY):
            raise SystemExit(f"the extender did not start (exit {proc.wait(30)})")
        yield int(line[len(READY):].split(";")[0]), line[len(READY):].split(";", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(60)


# --- the scheduler's side ---------------------------------------------------------------------------


@dataclass
class Template:
    """One pod's two requests, encoded once (the scheduler's encoding is not the extender's
    time): the filter's, and the prioritize's of the nodes that filter passed."""

    filter_body: bytes
    prioritize_body: bytes = b""
    passed: int = 0


@dataclass
class Phase:
    mode: str  # names | objects
    nodes: int
    templates: list[Template]
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"filter": [], "prioritize": []})
    failed: dict[str, int] = field(default_factory=lambda: {"filter": 0, "prioritize": 0})
    elapsed: float = 0.0
    server: dict[str, tuple[float, float]] = field(default_factory=dict)  # verb -> (seconds, requests) inside

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values())


def args_body(pod_obj: JSON, *, names: list[str] | None = None, nodes: JSON | None = None) -> bytes:
    """``ExtenderArgs`` as Go's encoding/json writes it: no JSON tags, so the field names; the
    pointer left nil (``NodeNames`` in objects mode, ``Nodes`` in names mode) is ``null``."""
    return codec.dumps({"Pod": pod_obj, "Nodes": nodes, "NodeNames": names})


async def _post(session: Any, url: str, body: bytes) -> tuple[float, int, bytes]:
    began = time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
        answer = await response.read()
    return time.perf_counter() - began, response.status, answer


async def prepare(session: Any, base: str, mode: str, count: int, kinds: int = 6) -> Phase:
    """The phase's request bodies, one pair per kind of pod; each filter is sent once (a
    warm-up) for the nodes it passes, and its answer checked."""
    templates = []
    names = node_names(count) if mode == "names" else None
    node_list = {"metadata": {}, "items": [scheduler_node(i) for i in range(count)]} if mode == "objects" else None
    for i in range(kinds):
        pod_obj = pod(i)
        body = args_body(pod_obj, names=names, nodes=node_list)
        _, status, raw = await _post(session, f"{base}/filter", body)
        answer = codec.loads(raw)
        if status != 200 or answer.get("Error"):
            raise SystemExit(f"the warm-up filter failed ({status}): {raw[:500]!r}")
        if mode == "names":
            passed = list(answer["NodeNames"])
            second = args_body(pod_obj, names=passed)
        else:
            passed = [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
            second = args_body(pod_obj, nodes={"metadata": {}, "items": answer["Nodes"]["items"]})
        _, status, raw = await _post(session, f"{base}/prioritize", second)
        scores = codec.loads(raw)
        if status != 200 or not isinstance(scores, list) or len(scores) != len(passed):
            raise SystemExit(f"the warm-up prioritize failed ({status}): {raw[:500]!r}")
        templates.append(Template(body, second, len(passed)))
    return Phase(mode, count, templates)


async def run_phase(session: Any, base: str, phase: Phase, rate: float, duration: float) -> None:
    """Pods at ``rate``/2 per second for ``duration`` seconds, each a filter then a prioritize."""
    pods_per_second = rate / 2
    total = max(1, int(duration * pods_per_second))

    async def one(k: int) -> None:
        template = phase.templates[k % len(phase.templates)]
        for verb, body in (("filter", template.filter_body), ("prioritize", template.prioritize_body)):
            try:
                seconds, status, answer = await _post(session, f"{base}/{verb}", body)
            except Exception:  # noqa: BLE001 - a failed request is counted, not fatal
                phase.failed[verb] += 1
                return
            bad = status != 200 or (b'"Error":""' not in answer if verb == "filter" else not answer.startswith(b"["))
            if bad:
                phase.failed[verb] += 1
            phase.latencies[verb].append(seconds)

    began = time.perf_counter()
    tasks = []
    for k in range(total):
        delay = began + k / pods_per_second - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(k)))
    await asyncio.gather(*tasks)
    # The sending window (``total`` pods, one every 1/pods_per_second s), or longer when the
    # last answers came late.
    phase.elapsed = max(time.perf_counter() - began, total / pods_per_second)


async def server_seconds(session: Any, base: str) -> dict[str, tuple[float, float]]:
    """The extender's own request-duration histogram (from awaiting the body to the answer
    built): per verb, (seconds summed, requests)."""
    async with session.get(f"{base}/metrics") as response:
        text = await response.text()
    out: dict[str, tuple[float, float]] = {}
    for verb in ("filter", "prioritize"):
        found = [0.0, 0.0]
        for line in text.splitlines():
            for i, suffix in enumerate(("_sum", "_count")):
                if line.startswith(f'{METRIC}{suffix}{{verb="{verb}"}} '):
                    found[i] = float(line.rsplit(" ", 1)[1])
        out[verb] = (found[0], found[1])
    return out


def percentile(values: list[float], share: float) -> float:
    """Nearest rank: the smallest value with at least ``share`` of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)] if ordered else float("nan")


def report(phase: Phase, rate: float, description: str) -> bool:
    """Print the phase's figures; whether its targets hold."""
    target = TARGETS_MS[phase.mode]
    print(description)
    worst = 0.0
    for verb, values in phase.latencies.items():
        p50, p99, top = (1000 * percentile(values, 0.5), 1000 * percentile(values, 0.99),
                         1000 * max(values, default=float("nan")))
        worst = max(worst, p99) if values else math.inf
        total, count = phase.server.get(verb, (0.0, 0.0))
        inside = f"; {1000 * total / count:.2f} ms mean in its handler" if count else ""
        print(f"  {verb:<10} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  max {top:7.2f} ms  "
              f"({len(values):,} requests, {phase.failed[verb]} failed{inside})")
    achieved = phase.requests / phase.elapsed if phase.elapsed else 0.0
    failed = sum(phase.failed.values())
    rate_ok = achieved >= RATE_SHARE * rate
    ok = worst < target and rate_ok and failed == 0
    print(f"  achieved {achieved:.1f} requests/s (asked {rate:g}/s: {'ok' if rate_ok else 'MISSED'}); "
          f"p99 target < {target:g} ms: {'ok' if ok else 'MISSED'}")
    return ok


async def measure(port: int, args: argparse.Namespace) -> bool:
    import aiohttp

    base = f"http://127.0.0.1:{port}"
    ok = True
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:
        rate_objects = args.rate_objects
        for mode, count, rate in (("names", args.nodes_cache, args.rate), ("objects", args.nodes_objects, rate_objects)):
            if count <= 0:
                continue
            phase = await prepare(session, base, mode, count)
            passed = sum(t.passed for t in phase.templates) / len(phase.templates)
            size = sum(len(t.filter_body) for t in phase.templates) / len(phase.templates)
            before = await server_seconds(session, base)
            await run_phase(session, base, phase, rate, args.duration)
            after = await server_seconds(session, base)
            phase.server = {verb: (after[verb][0] - before[verb][0], after[verb][1] - before[verb][1])
                            for verb in after}
            if mode == "names":
                what = f"nodeCacheCapable, {count:,} node names"
            else:
                what = f"Nodes mode, {count:,} whole Node objects"
            ok &= report(phase, rate, f"{what} at {rate:g} requests/s ({_size(size)} a filter request, "
                                      f"{passed:,.0f} nodes passed on average):")
    return ok


def _size(count: float) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count / 2**10:.0f} KiB"


def print_profile(path: str, top: int = 25) -> None:
    out = io.StringIO()
    stats = pstats.Stats(path, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    print(f"the extender's profile (by own time, top {top}):")
    print(out.getvalue().strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes-cache", type=int, default=5000, help="nodes in the view (nodeCacheCapable mode)")
    parser.add_argument("--nodes-objects", type=int, default=1000, help="whole Node objects per request (Nodes mode)")
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second (half filter, half prioritize)")
    parser.add_argument("--rate-objects", type=float, default=10.0, metavar="RATE",
                        help="requests per second in Nodes mode (default 10); kube-scheduler runs one "
                        "scheduling cycle at a time, so it cannot send more than 2 / (filter + prioritize latency)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load per mode")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--profile", metavar="FILE", help="profile the extender (cProfile) into FILE and print it")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(_serve(args.nodes_cache, args.profile))
        return 0
    with extender_process(max(args.nodes_cache, 1), args.profile) as (port, said):
        print(f"extender at 127.0.0.1:{port} ({said}); {args.duration:g} s of load per mode, each pod a filter "
              "then a prioritize of the nodes it passed, pods at a fixed rate; latency from sending to reading "
              "the whole answer")
        ok = asyncio.run(measure(port, args))
    if args.profile:
        print_profile(args.profile)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
