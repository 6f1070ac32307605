"""The spot-termination controller: cordon a node about to be reclaimed, evict its pods under
their PodDisruptionBudgets, and undo a false alarm.

State lives on the node, so a restart (or a new leader) carries on where the last one was:
- ``placement.novasphere.dev/drain-started``: when the drain began (RFC 3339); the deadline is
  the provider's notice when the signal gives one (``spot.nodes.ReclaimSignal``), else that
  plus ``--drain-timeout``: a restarted controller works to the same deadline;
- ``placement.novasphere.dev/cordoned-by: spot-controller``: it cordoned the node itself (a
  node someone else cordoned is never uncordoned by it).
A node with a reclaim signal (``spot.nodes.Detector``) gets both and is drained; a node that
carries them without a signal any more was a false alarm: the drain stops, the node is
uncordoned if it was the one to cordon it, and the annotations go. Writes are merge patches
with the ``spot-controller`` field manager; pods are only ever evicted (``spot.drain``).

Only the nodes that changed are looked at (an informer event marks a node dirty), besides a
full pass every ``resync`` seconds and a second look at a NotReady spot node when its
``notReadySeconds`` run out. Each drain runs in a task of its own: cordon, then evict, with at
most ``SpotSettings.parallel_evictions`` evictions in flight across all drains.

Events (core/v1, ``source.component: spot-controller``) say on the node when a drain starts,
ends or times out (naming the pods a budget kept) and on each pod when it is evicted or blocked
(once per pod). They are written in the background, as client-go's ``tools/record`` writes
them (``StartRecordingToSink``: the recorder queues, up to 1000, and drops beyond), so that a
slow Event never holds up an eviction.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from webhook import PREFIX
from webhook.cluster.cache import NODES, ClusterCache
from webhook.cluster.client import ApiError, Client
from webhook.cluster.informer import Projection
from webhook.cluster.metrics import ClusterViewCollector
from webhook.kube.times import format_time, timestamp
from webhook.spot.config import SpotConfig
from webhook.spot.drain import (
    MIRROR_ANNOTATION,
    SYSTEM_CLOCK,
    Clock,
    DrainReport,
    Evictor,
    NodeDrain,
    controller_uid,
    evictable,
    pod_key,
    ready,
    skip_reason,
)
from webhook.spot.nodes import Detector, ReclaimSignal

__all__ = ["CORDONED_BY", "DRAIN_STARTED", "FIELD_MANAGER", "EventRecorder", "SpotController", "SpotSettings"]

log = logging.getLogger(__name__)

FIELD_MANAGER = COMPONENT = "spot-controller"
CORDONED_BY = f"{PREFIX}cordoned-by"
DRAIN_STARTED = f"{PREFIX}drain-started"
MAX_QUEUED_EVENTS = 1000  # client-go tools/record: maxQueuedEvents
RESULTS = ("evicted", "gone", "blocked", "failed", "retry")  # Evictor.evict's answers
EVENT_WRITERS = 4  # client-go writes from one goroutine; a few here keep pace with parallel evictions


@dataclass(frozen=True)
class SpotSettings:
    drain_timeout: float = 120.0  # seconds from the signal until the drain gives up (without a notice)
    exclude_namespaces: tuple[str, ...] = ()
    dry_run: bool = False
    eviction_version: str = "policy/v1"
    backoff: float = 1.0
    max_backoff: float = 10.0
    parallel_evictions: int = 10  # evictions in flight at once, across all drains


class SpotMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        prefix, r = "placement_webhook_spot", self.registry
        self.draining = Gauge(f"{prefix}_nodes_draining", "Nodes being drained now.", registry=r)
        self.evictions = Counter(f"{prefix}_evictions", "Evictions, by result (evicted, gone, blocked, failed, "
                                 "retry).", ["result"], registry=r)
        self.blocked = Counter(f"{prefix}_pdb_blocked", "Pods a PodDisruptionBudget still kept at a drain's "
                               "deadline.", registry=r)
        self.drains = Counter(f"{prefix}_drains", "Drains, by outcome (drained, timeout, false-alarm).",
                              ["outcome"], registry=r)
        self.duration = Histogram(f"{prefix}_drain_duration_seconds", "From the signal to the drain's end.",
                                  buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1800), registry=r)
        self.leader = Gauge(f"{prefix}_leader", "1 while this replica acts.", registry=r)
        self.errors = Counter(f"{prefix}_errors", "Failed writes (cordon, uncordon, events).", ["kind"], registry=r)

    def watch_cluster(self, status: Callable[[], Mapping[str, Mapping[str, Any]]]) -> None:
        self.registry.register(ClusterViewCollector(status))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class CountsErrors(Protocol):
    """What the recorder counts its failed writes on: an ``errors`` counter by kind."""

    @property
    def errors(self) -> Counter: ...


class EventRecorder:
    """core/v1 Events (``tools/record``'s shape), queued and written in the background; never
    raises. ``component`` is the Events' ``source.component`` (the rebalancer records its own)."""

    def __init__(self, client: Client, *, clock: Clock, metrics: CountsErrors, dry_run: bool = False,
                 writers: int = EVENT_WRITERS, component: str = COMPONENT) -> None:
        self.client = client
        self.clock = clock
        self.metrics = metrics
        self.dry_run = dry_run
        self.writers = writers
        self.component = component
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(MAX_QUEUED_EVENTS)
        self.tasks: list[asyncio.Task[None]] = []
        self.dropped = 0
        self._second, self._stamp = -1, ""

    def record(self, obj: Mapping[str, Any], kind: str, type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        if self.dry_run:
            log.info("dry run: would record event", extra={"fields": {"object": f"{kind}/{meta.get('name')}",
                                                                      "reason": reason, "message": message}})
            return
        namespace = str(meta.get("namespace") or "default")
        now = self._now()
        involved = {"kind": kind, "name": meta.get("name"), "apiVersion": "v1"}
        if kind == "Pod":
            involved["namespace"] = namespace
        if meta.get("uid"):
            involved["uid"] = meta.get("uid")
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{meta.get('name')}.{random.getrandbits(64):016x}", "namespace": namespace},
                "involvedObject": involved, "reason": reason, "message": message[:1024], "type": type_,
                "source": {"component": self.component}, "reportingComponent": self.component,
                "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        try:
            self.queue.put_nowait((namespace, body))
        except asyncio.QueueFull:  # client-go's DropIfChannelFull
            self.dropped += 1
            self.metrics.errors.labels("event").inc()
            return
        if len(self.tasks) < self.writers:  # started as the first Events come; they live until close()
            self.tasks.append(asyncio.create_task(self._write(), name=f"{self.component}-events"))

    def _now(self) -> str:
        """The clock's time as metav1.Time, formatted once per second (a drain writes many Events in one)."""
        second = int(self.clock.time())
        if second != self._second:
            self._second = second
            self._stamp = format_time(datetime.datetime.fromtimestamp(second, datetime.UTC))
        return self._stamp

    async def _write(self) -> None:
        while True:
            namespace, body = await self.queue.get()
            try:
                await self.client.create(f"/api/v1/namespaces/{namespace}/events", body)
            except (ApiError, aiohttp.ClientError, TimeoutError, OSError) as exc:
                self.metrics.errors.labels("event").inc()
                log.debug("could not record event", extra={"fields": {"reason": body["reason"], "error": str(exc)}})
            finally:
                self.queue.task_done()

    async def close(self, grace: float = 2.0) -> None:
        """Write what is queued (for ``grace`` seconds at most), then stop the writers."""
        if self.tasks:  # join(), not empty(): a writer may be in the middle of the last one
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.queue.join(), grace)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()


@dataclass
class _Drain:
    task: asyncio.Task[None]
    signal: ReclaimSignal
    deadline: float  # Unix time
    cordoned: bool = False  # this process cordoned the node in this drain
    pods: NodeDrain | None = None
    report: DrainReport = field(default_factory=DrainReport)

    @property
    def started(self) -> float:
        return self.signal.when

    @property
    def reason(self) -> str:
        return self.signal.source


class SpotController:
    """Watches nodes (and, through the view's pods-by-node index, the pods on them) in ``cache`` and
    drains the marked ones."""

    def __init__(self, client: Client, cache: ClusterCache, config: SpotConfig, settings: SpotSettings = SpotSettings(),
                 *, metrics: SpotMetrics | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.client = client
        self.cache = cache
        self.config = config
        self.settings = settings
        self.detector = Detector(config)
        self.metrics = metrics or SpotMetrics()
        self.clock = clock
        self.evictor = Evictor(client, api_version=settings.eviction_version, dry_run=settings.dry_run)
        self.events = EventRecorder(client, clock=clock, metrics=self.metrics, dry_run=settings.dry_run)
        self.slots = asyncio.Semaphore(max(1, settings.parallel_evictions))
        self.drains: dict[str, _Drain] = {}
        self.pods = cache.pods_by_node(_pod_projection())
        self.dirty: set[str] = set()  # nodes to look at in the next round
        self.rescan = True  # the next round looks at every node
        self.recheck: dict[str, float] = {}  # node -> when to look at it again (Unix time)
        self.rounds = 0  # rounds done: tests wait for one instead of sleeping
        self.wake = asyncio.Event()
        self.pods.listen(self._on_pod)
        cache.informers[NODES].add_handler(self._on_node)

    # -- what the informers say --
    def _on_node(self, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        self.dirty.add(key)
        self.wake.set()

    def _on_pod(self, key: str, before: str | None, after: str | None, old: Mapping[str, Any] | None,
                new: Mapping[str, Any] | None) -> None:
        if self.draining:
            self._tell_drains(key, before, after or "", new, old)

    def _tell_drains(self, key: str, before: str | None, node: str, new: Mapping[str, Any] | None,
                     old: Mapping[str, Any] | None) -> None:
        """The drains of the pod's node (old and new) hear of it; every drain hears of a pod
        that became Ready, which may give a budget room for one of its blocked pods."""
        for name in {before, node}:
            drain = self.drains.get(name) if name else None
            if drain is not None and drain.pods is not None:
                keep = new is not None and name == node and not skip_reason(new, self.settings.exclude_namespaces)
                drain.pods.offer(key, new if keep else None)
        if new is not None and ready(new) and not ready(old):
            uid = controller_uid(new)
            if uid:
                namespace = str((new.get("metadata") or {}).get("namespace") or "default")
                for drain in self.drains.values():
                    if drain.pods is not None:
                        drain.pods.ready(namespace, uid)

    @property
    def draining(self) -> bool:
        """Some drain is evicting now (a finished one keeps its entry until its signal goes)."""
        return any(d.pods is not None for d in self.drains.values())

    def nodes(self) -> dict[str, Mapping[str, Any]]:
        return {str((n.get("metadata") or {}).get("name")): n for n in self.cache.informers[NODES].values()}

    def pods_on(self, node: str) -> list[Mapping[str, Any]]:
        return evictable(self.pods.assigned_to(node).values(), self.settings.exclude_namespaces)

    # -- the loop --
    async def run(self, stop: asyncio.Event, *, resync: float = 10.0) -> None:
        """Reconcile the nodes that changed (every node each ``resync`` seconds) until ``stop``."""
        stopping = asyncio.ensure_future(stop.wait())
        stopping.add_done_callback(lambda _: self.wake.set())
        next_resync = self.clock.time() + resync
        try:
            while not stop.is_set():
                self.wake.clear()
                try:
                    await self.reconcile()
                except Exception:  # noqa: BLE001 - a bug in one round must not stop the controller
                    log.exception("reconcile failed")
                due = min(next_resync, *self.recheck.values()) if self.recheck else next_resync
                await self.clock.wait(self.wake, due - self.clock.time())
                now = self.clock.time()
                if now >= next_resync:
                    self.rescan, next_resync = True, now + resync
                for name in [n for n, at in self.recheck.items() if at <= now]:
                    del self.recheck[name]
                    self.dirty.add(name)
        finally:
            stopping.cancel()
            await self._stop_drains()
            await self.events.close()

    async def _stop_drains(self) -> None:
        drains = list(self.drains.values())
        self.drains.clear()
        for drain in drains:
            drain.task.cancel()
        await asyncio.gather(*(d.task for d in drains), return_exceptions=True)
        self.metrics.draining.set(0)

    async def reconcile(self) -> None:
        """One round over the dirty nodes (every node after a resync)."""
        informer = self.cache.informers[NODES]
        if self.rescan:
            names, self.rescan = {*informer.keys(), *self.drains}, False
            self.dirty.clear()
        else:
            names, self.dirty = self.dirty, set()
        now = self.clock.time()
        for name in sorted(names):
            await self._reconcile_node(name, informer.get(name), now)
        self.metrics.draining.set(len(self.drains))
        self.rounds += 1

    async def _reconcile_node(self, name: str, node: Mapping[str, Any] | None, now: float) -> None:
        if node is None:  # the node is gone: nothing left to drain
            self.recheck.pop(name, None)
            drain = self.drains.pop(name, None)
            if drain is not None:
                drain.task.cancel()
            return
        signal = self.detector.signal(node, now)
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if signal is None:
            self._recheck_not_ready(name, node)
            if DRAIN_STARTED in annotations or name in self.drains:
                await self._false_alarm(name, node)
        elif name not in self.drains:
            self._start(name, node, signal, timestamp(annotations.get(DRAIN_STARTED)))

    def _recheck_not_ready(self, name: str, node: Mapping[str, Any]) -> None:
        """A NotReady spot node becomes a reclaim when its notReadySeconds run out: look again then."""
        since, limit = self.detector.not_ready_since(node), self.config.reclaim.not_ready_seconds
        if since is None or limit is None:
            self.recheck.pop(name, None)
        else:
            self.recheck[name] = since + limit + 0.001  # just past the limit, which is not yet a reclaim

    def _start(self, name: str, node: Mapping[str, Any], signal: ReclaimSignal, started: float | None) -> None:
        """Begin (or, with ``started`` from the node, resume) a drain in a task of its own."""
        # Whole seconds, as the annotation keeps it: a resumed drain has the very same deadline.
        signal = dataclasses.replace(signal, when=started if started is not None else float(math.floor(signal.when)))
        deadline = signal.deadline(self.settings.drain_timeout)
        task = asyncio.create_task(self._drain(name, node, started is not None), name=f"drain-{name}")
        task.add_done_callback(_log_failure)
        self.drains[name] = _Drain(task, signal, deadline)
        self.recheck.pop(name, None)

    async def _drain(self, name: str, node: Mapping[str, Any], resumed: bool) -> None:
        drain = self.drains[name]
        if not await self._cordon(name, node, drain, resumed):
            self.drains.pop(name, None)
            self.recheck[name] = self.clock.time() + self.settings.backoff  # try again then
            return
        log.info("draining node", extra={"fields": {"node": name, "reason": drain.reason, "kind": drain.signal.kind,
                                                    "resumed": resumed, "deadline": drain.deadline}})

        counted = {result: self.metrics.evictions.labels(result) for result in RESULTS}

        def on_result(pod: Mapping[str, Any], result: str, message: str) -> None:
            counted[result].inc()
            if result == "evicted":
                self.events.record(pod, "Pod", "Normal", "Evicted", f"evicted from spot node {name} before reclaim")
            elif result == "blocked" and pod_key(pod) not in told:
                told.add(pod_key(pod))  # one Event per blocked pod, not one per retry
                self.events.record(pod, "Pod", "Warning", "EvictionBlocked", message)

        told: set[str] = set()
        drain.pods = NodeDrain(self.evictor, drain.deadline, clock=self.clock, slots=self.slots,
                               backoff=self.settings.backoff, max_backoff=self.settings.max_backoff,
                               on_result=on_result)
        drain.report = report = await drain.pods.run(self.pods_on(name))
        drain.pods = None  # done: pod changes no longer concern it
        self.metrics.duration.observe(max(0.0, self.clock.time() - drain.started))
        self._report(name, node, report)

    async def _cordon(self, name: str, node: Mapping[str, Any], drain: _Drain, resumed: bool) -> bool:
        """Cordon the node and say when the drain began (nothing when resuming, unless someone
        uncordoned a node this controller had cordoned); False when the write failed."""
        unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if resumed:
            if not unschedulable and annotations.get(CORDONED_BY) == COMPONENT:
                await self._patch_node(name, {"spec": {"unschedulable": True}}, "cordon")
            return True
        began = format_time(datetime.datetime.fromtimestamp(drain.started, datetime.UTC))
        patch: dict[str, Any] = {"metadata": {"annotations": {DRAIN_STARTED: began}}}
        if not unschedulable:
            patch["spec"] = {"unschedulable": True}
            patch["metadata"]["annotations"][CORDONED_BY] = COMPONENT
        if not await self._patch_node(name, patch, "cordon"):
            return False
        drain.cordoned = not unschedulable
        self.events.record(node, "Node", "Warning", "SpotReclaim",
                           f"{drain.reason}: cordoned and draining" if not unschedulable
                           else f"{drain.reason}: draining (the node was already cordoned)")
        return True

    def _report(self, name: str, node: Mapping[str, Any], report: DrainReport) -> None:
        left = self.pods_on(name)
        done = {*report.evicted, *report.gone}
        if not left or all(pod_key(p) in done for p in left):
            self.metrics.drains.labels("drained").inc()
            self.events.record(node, "Node", "Normal", "Drained", f"{len(report.evicted)} pod(s) evicted")
            log.info("node drained", extra={"fields": {"node": name, "evicted": len(report.evicted)}})
            return
        self.metrics.drains.labels("timeout").inc()
        self.metrics.blocked.inc(len(report.blocked))
        kept = ", ".join(sorted(report.blocked)) or "none"
        failed = "; ".join(f"{k}: {v}" for k, v in sorted(report.failed.items()))
        self.events.record(node, "Node", "Warning", "DrainTimeout",
                           f"drain deadline passed; kept by a PodDisruptionBudget: {kept}"
                           + (f"; failed: {failed}" if failed else ""))
        log.warning("drain deadline passed", extra={"fields": {"node": name, "blocked": sorted(report.blocked),
                                                               "failed": report.failed}})

    async def _false_alarm(self, name: str, node: Mapping[str, Any]) -> None:
        drain = self.drains.pop(name, None)
        if drain is not None:
            drain.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drain.task
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        patch: dict[str, Any] = {"metadata": {"annotations": {DRAIN_STARTED: None, CORDONED_BY: None}}}
        # Our cordon may not be in the view yet: what this drain did counts as much as the node says.
        if annotations.get(CORDONED_BY) == COMPONENT or (drain is not None and drain.cordoned):
            patch["spec"] = {"unschedulable": None}
        if await self._patch_node(name, patch, "uncordon"):
            self.metrics.drains.labels("false-alarm").inc()
            self.events.record(node, "Node", "Normal", "SpotReclaimCancelled",
                               "the reclaim signal went away: " + ("uncordoned" if "spec" in patch
                                                                   else "left cordoned (not cordoned by this controller)"))
            log.info("false alarm", extra={"fields": {"node": name, "uncordoned": "spec" in patch}})
        else:
            self.recheck[name] = self.clock.time() + self.settings.backoff

    # -- writes --
    async def _patch_node(self, name: str, patch: Mapping[str, Any], kind: str) -> bool:
        if self.settings.dry_run:
            log.info(f"dry run: would {kind} node", extra={"fields": {"node": name, "patch": patch}})
            return True
        try:
            await self.client.patch(f"/api/v1/nodes/{name}", patch, kind="merge", field_manager=FIELD_MANAGER)
            return True
        except (ApiError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            self.metrics.errors.labels(kind).inc()
            log.warning(f"could not {kind} node", extra={"fields": {"node": name, "error": str(exc)}})
            return False


def _log_failure(task: asyncio.Task[None]) -> None:
    """A drain that ended in a bug says so (its node keeps its entry: a false alarm or the node's
    going clears it)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("drain failed", exc_info=task.exception())


def _pod_projection() -> Projection:
    """What the drain reads of a pod, and no more (every pod of the cluster passes through it):
    identity, its controller, the mirror-pod annotation, whether it is terminating, its node,
    phase and Ready condition."""

    def project(obj: Mapping[str, Any]) -> dict[str, Any]:
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        out: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace")}
        if meta.get("uid"):
            out["uid"] = meta["uid"]
        owners = [{k: ref.get(k) for k in ("apiVersion", "kind", "name", "uid", "controller")}
                  for ref in meta.get("ownerReferences") or () if isinstance(ref, Mapping) and ref.get("controller")]
        if owners:
            out["ownerReferences"] = owners
        if meta.get("deletionTimestamp") is not None:
            out["deletionTimestamp"] = meta["deletionTimestamp"]
        annotations = meta.get("annotations") or {}
        if MIRROR_ANNOTATION in annotations:
            out["annotations"] = {MIRROR_ANNOTATION: annotations[MIRROR_ANNOTATION]}
        kept: dict[str, Any] = {"phase": status.get("phase")}
        for condition in status.get("conditions") or ():
            if isinstance(condition, Mapping) and condition.get("type") == "Ready":
                kept["conditions"] = [{"type": "Ready", "status": condition.get("status")}]
        return {"metadata": out, "spec": {"nodeName": (obj.get("spec") or {}).get("nodeName")}, "status": kept}

    return project


def plan(controller: SpotController) -> list[str]:
    """What a pass would do, in words, for ``--dry-run``."""
    lines: list[str] = []
    now = controller.clock.time()
    for name, node in sorted(controller.nodes().items()):
        signal = controller.detector.signal(node, now)
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if signal is None:
            if DRAIN_STARTED in annotations:
                undo = "uncordon it" if annotations.get(CORDONED_BY) == COMPONENT else "leave its cordon"
                lines.append(f"node {name}: the reclaim signal is gone: stop its drain and {undo}")
            continue
        cordon = "already cordoned" if (node.get("spec") or {}).get("unschedulable") else "cordon it"
        lines.append(f"node {name}: {signal.source}: {cordon}, then evict:")
        pods = sorted(controller.pods.assigned_to(name).values(), key=pod_key)
        for pod in pods:
            why = skip_reason(pod, controller.settings.exclude_namespaces)
            lines.append(f"  {pod_key(pod)}" + (f" (skipped: {why})" if why else ""))
        if not pods:
            lines.append("  (no pods)")
    return lines or ["no node carries a reclaim signal"]
