"""The labeler's loop over the cluster view: which nodes to label, when, and what it did.

The view is the server's ``ClusterCache`` with its pods-by-node index (pods projected to what
the request arithmetic reads, ``cluster.snapshot.project_pod``). Change handlers keep each pod's
requests beside the index and mark a node dirty when a pod lands on it, leaves it or changes,
when its allocatable changes, or when its own labels change under it (someone else wrote
them); ``run`` relabels the dirty nodes as soon as there are some, and every node every
``interval`` seconds. A pass computes every label from memory, then writes the changes
(``writes.Writer``); with ``dry_run`` it only reports them.

Usage from metrics.k8s.io (``source="metrics"``) is read at the start of each pass; when
the metrics API is missing or failing, the pass falls back to requests, with a warning the
first time.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from webhook.cluster.cache import NODES, ClusterCache
from webhook.cluster.client import ApiError, Client
from webhook.cluster.informer import Projection
from webhook.cluster.pods import PODS
from webhook.cluster.snapshot import SharedValues, project_pod
from webhook.labeler.metrics import LabelerMetrics
from webhook.labeler.values import DEFAULT_GPU_RESOURCES, LABELS, NodeLabels, RequestsMemo, Steps, compute
from webhook.labeler.writes import Change, PassReport, Writer, plan
from webhook.runtime.sync import first
from webhook.scheduler.resources import Resource

__all__ = ["METRICS_PATH", "PODS", "Labeler", "LabelerConfig"]

log = logging.getLogger(__name__)

METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/nodes"
SOURCES = ("requests", "metrics")


@dataclass(frozen=True)
class LabelerConfig:
    steps: Steps = Steps()
    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES
    source: str = "requests"
    rate: float = 10.0  # writes per second
    interval: float = 60.0  # seconds between passes over every node
    settle: float = 1.0  # seconds to gather the changes of a burst (a rollout) into one pass
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown usage source {self.source!r} (requests or metrics)")
        if self.interval <= 0:
            raise ValueError("the interval must be positive")


class Labeler:
    """Labels nodes from ``cache``; writes through ``client`` unless ``config.dry_run``."""

    def __init__(self, client: Client, cache: ClusterCache, config: LabelerConfig = LabelerConfig(), *,
                 metrics: LabelerMetrics | None = None, writer: Writer | None = None) -> None:
        self.client = client
        self.cache = cache
        self.config = config
        self.metrics = metrics or LabelerMetrics()
        self.writer = writer or Writer(client, rate=config.rate)
        self.pods = cache.pods_by_node(_pod_projection())
        # pod key -> what the pod holds (its requests, computed once per pod event), or why that
        # could not be told (a quantity that does not parse); for every pod the index holds
        self.held: dict[str, Resource | str] = {}
        self.requests = RequestsMemo()
        self.dirty: set[str] = set()
        # Labels written whose watch event has not come back yet: a pass in between compares
        # with them, not with the view's older labels, so it does not write them again.
        self.recent: dict[str, dict[str, str]] = {}
        self.wake = asyncio.Event()
        self._metrics_warned = False
        self.pods.listen(self._on_pod)
        cache.informers[NODES].add_handler(self._on_node)

    # -- change handlers (called by the informers, never await) --
    def _on_pod(self, key: str, before: str | None, after: str | None, old: Mapping[str, Any] | None,
                new: Mapping[str, Any] | None) -> None:
        self.held.pop(key, None)
        if before is not None:
            self._mark(before)
        if new is not None and after is not None:
            try:
                self.held[key] = self.requests(new)
            except ValueError as exc:
                self.held[key] = str(exc)
            self._mark(after)

    def _on_node(self, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        if new is None:
            self.recent.pop(key, None)
            self.dirty.discard(key)
            return
        if old is not None and _own(old) != _own(new):
            self.recent.pop(key, None)  # the view has caught up with (or moved past) our write
        if old is None or _allocatable(old) != _allocatable(new) or _own(old) != _own(new):
            self._mark(key)

    def _mark(self, node: str) -> None:
        self.dirty.add(node)
        self.wake.set()

    # -- passes --
    def nodes(self) -> dict[str, Mapping[str, Any]]:
        return {str((n.get("metadata") or {}).get("name")): n for n in self.cache.informers[NODES].values()}

    def _current(self, nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
        """The nodes as the view shows them, with our writes not yet seen laid over."""
        out = dict(nodes)
        for name, written in self.recent.items():
            node = out.get(name)
            if node is not None:
                meta = node.get("metadata") or {}
                out[name] = {**node, "metadata": {**meta, "labels": {**(meta.get("labels") or {}), **written}}}
        return out

    async def usage(self) -> dict[str, Mapping[str, Any]] | None:
        """Measured usage by node (metrics.k8s.io), or None to count requests."""
        if self.config.source != "metrics":
            return None
        try:
            answer = await self.client.get(METRICS_PATH)
        except (ApiError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            if not self._metrics_warned:
                log.warning("metrics.k8s.io is not answering: usage labels count requests instead",
                            extra={"fields": {"error": str(exc)}})
                self._metrics_warned = True
            self.metrics.metrics_fallbacks.inc()
            return None
        self._metrics_warned = False
        return {str((item.get("metadata") or {}).get("name")): item.get("usage") or {}
                for item in answer.get("items") or () if isinstance(item, Mapping)}

    def compute(self, names: Iterable[str], nodes: Mapping[str, Mapping[str, Any]],
                usage: Mapping[str, Mapping[str, Any]] | None) -> list[NodeLabels]:
        out: list[NodeLabels] = []
        for name in names:
            node = nodes.get(name)
            if node is None:
                continue
            measured = None if usage is None else usage.get(name)
            held = Resource()
            problem = ""
            for entry in (self.held[key] for key in self.pods.assigned_to(name)):
                if isinstance(entry, str):
                    problem = entry
                    break
                held.add(entry)
            if problem:
                out.append(NodeLabels(name, problem=problem))
                continue
            out.append(compute(node, steps=self.config.steps, gpu_resources=self.config.gpu_resources,
                               usage=measured, requested=held))
        return out

    async def run_pass(self, names: Iterable[str] | None = None) -> tuple[PassReport, list[NodeLabels], list[Change]]:
        """Compute (and unless dry-run, write) the labels of ``names`` (None: every node)."""
        started = time.perf_counter()
        nodes = self.nodes()
        wanted = sorted(nodes) if names is None else sorted(n for n in set(names) if n in nodes)
        computed = self.compute(wanted, nodes, await self.usage())
        report = PassReport(nodes=len(wanted))
        for result in computed:
            if result.problem:
                report.skipped[result.node] = result.problem
                log.warning("node left unlabelled this pass", extra={"fields": {"node": result.node,
                                                                                   "reason": result.problem}})
        changes = plan(self._current(nodes), computed)
        report.unchanged = len(computed) - len(report.skipped) - len(changes)
        if not self.config.dry_run:
            # Recorded before the writes go out: a write's watch event can come back before
            # ``apply`` returns, and a record made after it would outlive its echo and hide a
            # later change by someone else (the pass would take the view for our write).
            for change in changes:
                self.recent.setdefault(change.node, {}).update(change.labels)
            await self.writer.apply(changes, report)
            for node in report.failed:
                self.recent.pop(node, None)  # not written: the view is right about it
        report.seconds = time.perf_counter() - started
        self.metrics.observe(report, total_nodes=len(nodes))
        return report, computed, changes

    async def run(self, stop: asyncio.Event) -> None:
        """Label dirty nodes as they come, and every node every ``interval`` seconds, until
        ``stop`` is set."""
        next_full = 0.0
        while not stop.is_set():
            now = time.monotonic()
            if now >= next_full:
                self.dirty.clear()
                self.wake.clear()
                await self._guarded(None)
                next_full = time.monotonic() + self.config.interval
            elif self.dirty:
                await first(stop, timeout=self.config.settle)
                names, self.dirty = self.dirty, set()
                self.wake.clear()
                await self._guarded(names)
            await first(stop, self.wake, timeout=max(0.0, next_full - time.monotonic()))

    async def _guarded(self, names: Iterable[str] | None) -> None:
        try:
            report, _, _ = await self.run_pass(names)
        except Exception:  # noqa: BLE001 - a bug in one pass must not stop the labeler
            log.exception("label pass failed")
            self.metrics.errors.labels("pass").inc()
            return
        if report.written or report.failed or report.skipped:
            log.info("label pass", extra={"fields": _summary(report)})


def _summary(report: PassReport) -> dict[str, Any]:
    return {"nodes": report.nodes, "written": report.written, "unchanged": report.unchanged,
            "skipped": len(report.skipped), "failed": len(report.failed), "seconds": round(report.seconds, 3)}


def _pod_projection() -> Projection:
    share = SharedValues()
    return lambda obj: project_pod(obj, share=share)


def _allocatable(node: Mapping[str, Any]) -> Any:
    return (node.get("status") or {}).get("allocatable")


def _own(node: Mapping[str, Any]) -> dict[str, Any]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return {k: v for k, v in labels.items() if k in LABELS}
