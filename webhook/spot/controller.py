"""The spot-termination controller: cordon a node about to be reclaimed, evict its pods under
their PodDisruptionBudgets, and undo a false alarm.

State lives on the node, so a restart (or a new leader) carries on where the last one was:
- ``placement.novasphere.dev/drain-started``: when the drain began (RFC 3339); the deadline is
  that plus ``--drain-timeout``;
- ``placement.novasphere.dev/cordoned-by: spot-controller``: it cordoned the node itself (a
  node someone else cordoned is never uncordoned by it).
A node with a reclaim signal (``spot.nodes.Detector``) gets both and is drained; a node that
carries them without a signal any more was a false alarm: the drain stops, the node is
uncordoned if it was the one to cordon it, and the annotations go. Writes are merge patches
with the ``spot-controller`` field manager; pods are only ever evicted.

Events (core/v1, ``source.component: spot-controller``) say on the node when a drain starts,
ends or times out (naming the pods a budget kept) and on each pod when it is evicted or blocked.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from webhook import PREFIX
from webhook.cluster.cache import NODES, ClusterCache
from webhook.cluster.client import ApiError, Client
from webhook.cluster.controllers import first
from webhook.cluster.metrics import ClusterViewCollector
from webhook.cluster.snapshot import POD_PATH, SharedValues, project_pod
from webhook.kube.times import format_time, timestamp
from webhook.spot.config import SpotConfig
from webhook.spot.drain import MIRROR_ANNOTATION, DrainReport, Evictor, drain_pods, evictable, skip_reason
from webhook.spot.nodes import Detector

__all__ = ["CORDONED_BY", "DRAIN_STARTED", "FIELD_MANAGER", "SpotController", "SpotSettings"]

log = logging.getLogger(__name__)

FIELD_MANAGER = COMPONENT = "spot-controller"
CORDONED_BY = f"{PREFIX}cordoned-by"
DRAIN_STARTED = f"{PREFIX}drain-started"
PODS = "pods"


@dataclass(frozen=True)
class SpotSettings:
    drain_timeout: float = 120.0  # seconds from the signal until the drain gives up
    exclude_namespaces: tuple[str, ...] = ()
    dry_run: bool = False
    eviction_version: str = "policy/v1"
    backoff: float = 1.0
    max_backoff: float = 10.0


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

    def watch_cluster(self, status: Any) -> None:
        self.registry.register(ClusterViewCollector(status))

    def render(self) -> bytes:
        return generate_latest(self.registry)


@dataclass
class _Drain:
    task: asyncio.Task[None]
    started: float  # Unix time
    reason: str
    report: DrainReport = field(default_factory=DrainReport)


class SpotController:
    """Watches nodes (and the pods on them) in ``cache`` and drains the marked ones."""

    def __init__(self, client: Client, cache: ClusterCache, config: SpotConfig, settings: SpotSettings = SpotSettings(),
                 *, metrics: SpotMetrics | None = None, clock: Any = time.time) -> None:
        self.client = client
        self.cache = cache
        self.config = config
        self.settings = settings
        self.detector = Detector(config)
        self.metrics = metrics or SpotMetrics()
        self.clock = clock
        self.evictor = Evictor(client, api_version=settings.eviction_version, dry_run=settings.dry_run)
        self.drains: dict[str, _Drain] = {}
        self.by_node: dict[str, dict[str, Mapping[str, Any]]] = {}
        self.pod_node: dict[str, str] = {}
        self.wake = asyncio.Event()
        if PODS not in cache.informers:
            cache.add(PODS, POD_PATH, _pod_projection())
        cache.informers[PODS].add_handler(self._on_pod)
        cache.informers[NODES].add_handler(lambda *_: self.wake.set())

    def _on_pod(self, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        before = self.pod_node.pop(key, None)
        if before is not None:
            self.by_node.get(before, {}).pop(key, None)
        node = str(((new or {}).get("spec") or {}).get("nodeName") or "")
        if new is not None and node:
            self.by_node.setdefault(node, {})[key] = new
            self.pod_node[key] = node

    def nodes(self) -> dict[str, Mapping[str, Any]]:
        return {str((n.get("metadata") or {}).get("name")): n for n in self.cache.informers[NODES].values()}

    def pods_on(self, node: str) -> list[Mapping[str, Any]]:
        return evictable(self.by_node.get(node, {}).values(), self.settings.exclude_namespaces)

    # -- the loop --
    async def run(self, stop: asyncio.Event, *, resync: float = 10.0) -> None:
        """Reconcile every node on each node change (and every ``resync`` seconds) until ``stop``."""
        try:
            while not stop.is_set():
                self.wake.clear()
                try:
                    await self.reconcile()
                except Exception:  # noqa: BLE001 - a bug in one round must not stop the controller
                    log.exception("reconcile failed")
                await first(stop, self.wake, timeout=resync)
        finally:
            for drain in list(self.drains.values()):
                drain.task.cancel()
            for drain in list(self.drains.values()):
                with contextlib.suppress(asyncio.CancelledError):
                    await drain.task
            self.drains.clear()
            self.metrics.draining.set(0)

    async def reconcile(self) -> None:
        now = self.clock()
        for name, node in self.nodes().items():
            reason = self.detector.reclaim(node, now)
            annotations = (node.get("metadata") or {}).get("annotations") or {}
            ours = DRAIN_STARTED in annotations
            if reason is not None and name not in self.drains:
                started = timestamp(annotations.get(DRAIN_STARTED)) if ours else None
                await self._start(name, node, reason, started)
            elif reason is None and (ours or name in self.drains):
                await self._false_alarm(name, node)
        for name in [n for n in self.drains if n not in self.nodes()]:
            self.drains.pop(name).task.cancel()  # the node is gone: nothing left to drain
        self.metrics.draining.set(len(self.drains))

    async def _start(self, name: str, node: Mapping[str, Any], reason: str, started: float | None) -> None:
        resumed = started is not None
        started = started if started is not None else self.clock()
        spec_unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if not resumed:
            patch: dict[str, Any] = {"metadata": {"annotations": {DRAIN_STARTED: format_time(datetime.datetime.now(datetime.UTC))}}}
            if not spec_unschedulable:
                patch["spec"] = {"unschedulable": True}
                patch["metadata"]["annotations"][CORDONED_BY] = COMPONENT
            if not await self._patch_node(name, patch, "cordon"):
                return  # tried again on the next round
            await self.event(node, "Node", "Warning", "SpotReclaim",
                             f"{reason}: cordoned and draining" if not spec_unschedulable
                             else f"{reason}: draining (the node was already cordoned)")
        elif not spec_unschedulable and annotations.get(CORDONED_BY) == COMPONENT:
            await self._patch_node(name, {"spec": {"unschedulable": True}}, "cordon")  # someone uncordoned it
        log.info("draining node", extra={"fields": {"node": name, "reason": reason, "resumed": resumed}})
        task = asyncio.create_task(self._drain(name, node, started), name=f"drain-{name}")
        self.drains[name] = _Drain(task, started, reason)

    async def _drain(self, name: str, node: Mapping[str, Any], started: float) -> None:
        deadline_wall = started + self.settings.drain_timeout
        deadline = time.monotonic() + max(0.0, deadline_wall - self.clock())

        told: set[str] = set()  # pods already told they are blocked: one Event each, not one per retry

        async def on_result(pod: Mapping[str, Any], result: str, message: str) -> None:
            self.metrics.evictions.labels(result).inc()
            if result == "evicted":
                await self.event(pod, "Pod", "Normal", "Evicted", f"evicted from spot node {name} before reclaim")
            elif result == "blocked" and _key(pod) not in told:
                told.add(_key(pod))
                await self.event(pod, "Pod", "Warning", "EvictionBlocked", message)

        report = await drain_pods(self.evictor, lambda: self.pods_on(name), deadline, on_result=on_result,
                                  backoff=self.settings.backoff, max_backoff=self.settings.max_backoff)
        if name in self.drains:
            self.drains[name].report = report
        self.metrics.duration.observe(max(0.0, self.clock() - started))
        left = self.pods_on(name)
        if not left or all(_key(p) in (*report.evicted, *report.gone) for p in left):
            self.metrics.drains.labels("drained").inc()
            await self.event(node, "Node", "Normal", "Drained", f"{len(report.evicted)} pod(s) evicted")
            log.info("node drained", extra={"fields": {"node": name, "evicted": len(report.evicted)}})
            return
        self.metrics.drains.labels("timeout").inc()
        self.metrics.blocked.inc(len(report.blocked))
        kept = ", ".join(sorted(report.blocked)) or "none"
        failed = "; ".join(f"{k}: {v}" for k, v in sorted(report.failed.items()))
        await self.event(node, "Node", "Warning", "DrainTimeout",
                         f"drain deadline passed; kept by a PodDisruptionBudget: {kept}" + (f"; failed: {failed}"
                                                                                           if failed else ""))
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
        if annotations.get(CORDONED_BY) == COMPONENT:
            patch["spec"] = {"unschedulable": None}
        if await self._patch_node(name, patch, "uncordon"):
            self.metrics.drains.labels("false-alarm").inc()
            await self.event(node, "Node", "Normal", "SpotReclaimCancelled",
                             "the reclaim signal went away: " + ("uncordoned" if "spec" in patch
                                                                 else "left cordoned (not cordoned by this controller)"))
            log.info("false alarm", extra={"fields": {"node": name, "uncordoned": "spec" in patch}})

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

    async def event(self, obj: Mapping[str, Any], kind: str, type_: str, reason: str, message: str) -> None:
        """A core/v1 Event about ``obj`` (``tools/record``'s shape); never raises."""
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        now = format_time(datetime.datetime.now(datetime.UTC))
        involved = {"kind": kind, "name": meta.get("name"), "apiVersion": "v1"}
        if kind == "Pod":
            involved["namespace"] = namespace
        if meta.get("uid"):
            involved["uid"] = meta.get("uid")
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
                "involvedObject": involved, "reason": reason, "message": message[:1024], "type": type_,
                "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
                "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        if self.settings.dry_run:
            log.info("dry run: would record event", extra={"fields": {"object": f"{kind}/{meta.get('name')}",
                                                                      "reason": reason, "message": message}})
            return
        try:
            await self.client.create(f"/api/v1/namespaces/{namespace}/events", body)
        except (ApiError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            self.metrics.errors.labels("event").inc()
            log.debug("could not record event", extra={"fields": {"reason": reason, "error": str(exc)}})


def _pod_projection() -> Any:
    """The scheduler's pod projection plus the mirror-pod annotation the drain skips by."""
    share = SharedValues()

    def project(obj: Mapping[str, Any]) -> dict[str, Any]:
        out = project_pod(obj, share=share)
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if MIRROR_ANNOTATION in annotations:
            out["metadata"] = {**out["metadata"], "annotations": {MIRROR_ANNOTATION: annotations[MIRROR_ANNOTATION]}}
        return out

    return project


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def plan(controller: SpotController) -> list[str]:
    """What a pass would do, in words, for ``--dry-run``."""
    lines: list[str] = []
    now = controller.clock()
    for name, node in sorted(controller.nodes().items()):
        reason = controller.detector.reclaim(node, now)
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if reason is None:
            if DRAIN_STARTED in annotations:
                undo = "uncordon it" if annotations.get(CORDONED_BY) == COMPONENT else "leave its cordon"
                lines.append(f"node {name}: the reclaim signal is gone: stop its drain and {undo}")
            continue
        cordon = "already cordoned" if (node.get("spec") or {}).get("unschedulable") else "cordon it"
        lines.append(f"node {name}: {reason}: {cordon}, then evict:")
        pods = sorted(controller.by_node.get(name, {}).values(), key=_key)
        for pod in pods:
            why = skip_reason(pod, controller.settings.exclude_namespaces)
            lines.append(f"  {_key(pod)}" + (f" (skipped: {why})" if why else ""))
        if not pods:
            lines.append("  (no pods)")
    return lines or ["no node carries a reclaim signal"]
