"""ClusterCache: the watch-backed ``ClusterView`` the server hands the engine.

A registry of informers by name (Nodes, Namespaces, PriorityClasses to begin with; Pods and
PodDisruptionBudgets can be added with ``add`` and their own projections), each keeping a small
projection of its objects; ``pods_by_node`` is the one index of pods by node the controllers
share. The ``ClusterView`` methods answer from memory and never await, so an admission review is
never delayed by the API server; ``fresh(max_age)`` tells the caller
whether the memory can be trusted (every informer synced and heard from recently).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .client import Client
from .informer import (
    REFLECTOR_BACKOFF,
    Backoff,
    BackoffPolicy,
    ChangeHandler,
    Informer,
    Object,
    Projected,
    Projection,
    server_wide_failure,
)
from .pods import POD_PATH, PODS, PodsByNode
from .view import NodeSet

log = logging.getLogger(__name__)

NODES, NAMESPACES, PRIORITY_CLASSES = "nodes", "namespaces", "priorityclasses"
MATCH_LABEL_KEYS_SINCE = (1, 31)  # MatchLabelKeysInPodAffinity: beta and on by default in 1.31


def _meta(obj: Object) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def project_node(obj: Object) -> Projected:
    """What the engine's node predicates read (``NodeEligibility`` of scheduler.filters,
    behind the rollout's domain count): name, labels, taints, unschedulable; plus allocatable
    and the Ready condition for later users. Heartbeat timestamps are left out, so status reports change nothing here."""
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    # lastTransitionTime changes only when the status does (heartbeats are lastHeartbeatTime):
    # the spot reclaim detector reads how long a node has not been Ready.
    ready = [{k: c[k] for k in ("type", "status", "reason", "lastTransitionTime") if k in c}
             for c in status.get("conditions") or () if c.get("type") == "Ready"]
    return {"metadata": {"name": meta.get("name"), "labels": dict(meta.get("labels") or {})},
            "spec": {"taints": list(spec.get("taints") or []), "unschedulable": bool(spec.get("unschedulable"))},
            "status": {"allocatable": dict(status.get("allocatable") or {}), "conditions": ready}}


def project_namespace(obj: Object) -> Projected:
    meta = _meta(obj)
    return {"metadata": {"name": meta.get("name"), "labels": dict(meta.get("labels") or {})}}


def project_priority_class(obj: Object) -> Projected:
    """The fields the Priority admission plugin reads (value, preemptionPolicy, globalDefault)."""
    return {"metadata": {"name": _meta(obj).get("name")}, "value": obj.get("value"),
            "preemptionPolicy": obj.get("preemptionPolicy"), "globalDefault": bool(obj.get("globalDefault"))}


RESOURCES: dict[str, tuple[str, Projection]] = {
    NODES: ("/api/v1/nodes", project_node),
    NAMESPACES: ("/api/v1/namespaces", project_namespace),
    PRIORITY_CLASSES: ("/apis/scheduling.k8s.io/v1/priorityclasses", project_priority_class),
}


class ClusterCache:
    """Informers for the resources the engine asks about, behind the ``ClusterView`` protocol.

    ``match_label_keys`` overrides what the server version implies (a cluster that changed the
    MatchLabelKeysInPodAffinity feature gate). ``page_size``, ``watch_timeout``, ``backoff`` and
    ``min_watch_duration`` are passed to every informer (tests make them short). ``resources``
    are the informers it starts with (the admission server without a cluster view watches
    none of the view's, only what it ``add``s); the ``ClusterView`` methods need the defaults.
    """

    def __init__(self, client: Client, *, match_label_keys: bool | None = None, page_size: int = 500,
                 watch_timeout: float = 300.0, backoff: BackoffPolicy = REFLECTOR_BACKOFF,
                 min_watch_duration: float = 1.0, version_timeout: float = 10.0,
                 projections: Mapping[str, Projection] | None = None,
                 resources: Mapping[str, tuple[str, Projection]] = RESOURCES) -> None:
        self.client = client
        self.match_label_keys_override = match_label_keys
        self.server_version: tuple[int, int] | None = None
        self.informers: dict[str, Informer] = {}
        self._options: dict[str, Any] = {"page_size": page_size, "watch_timeout": watch_timeout,
                                         "backoff": backoff, "min_watch_duration": min_watch_duration}
        self._backoff = backoff
        self._version_timeout = version_timeout
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._nodes: tuple[int, tuple[Mapping[str, Any], ...]] = (-1, ())
        self._pods: PodsByNode | None = None
        for name, (path, project) in resources.items():
            # ``projections`` replaces a resource's projection (a command that reads more of it).
            self.add(name, path, (projections or {}).get(name, project))

    def add(self, name: str, path: str, project: Projection, *, on_change: ChangeHandler | None = None) -> Informer:
        """Register another informer (e.g. pods with a small projection); started by ``start``,
        or at once when the cache is already running."""
        if name in self.informers:
            raise ValueError(f"an informer named {name!r} is already registered")
        informer = Informer(self.client, path, project, name=name, on_change=on_change, **self._options)
        self.informers[name] = informer
        if self._tasks:
            self._tasks[name] = asyncio.create_task(informer.run(), name=f"informer-{name}")
        return informer

    def pods_by_node(self, project: Projection) -> PodsByNode:
        """The view's one index of pods by node, shared by every caller. The first call registers
        the pod informer with ``project`` (unless one is registered already); later callers read
        what it keeps."""
        if self._pods is None:
            if PODS not in self.informers:
                self.add(PODS, POD_PATH, project)
            self._pods = PodsByNode(self.informers[PODS])
        return self._pods

    # -- lifecycle --
    async def start(self) -> None:
        """Start every informer and learn the server version (in the background until known)."""
        if self._tasks:
            return
        for name, informer in self.informers.items():
            self._tasks[name] = asyncio.create_task(informer.run(), name=f"informer-{name}")
        self._tasks["#version"] = asyncio.create_task(self._learn_version(), name="cluster-version")

    async def stop(self) -> None:
        tasks, self._tasks = list(self._tasks.values()), {}
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait_synced(self, timeout: float) -> bool:
        """Whether every informer completed its first list within ``timeout`` seconds."""
        waits = [i.synced_event.wait() for i in self.informers.values()]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
        except TimeoutError:
            return False
        return True

    async def _learn_version(self) -> None:
        """GET /version once; retried with the reflector's backoff until it answers."""
        backoff = Backoff(self._backoff)
        while self.server_version is None:
            try:
                self.server_version = await asyncio.wait_for(self.client.version(), self._version_timeout)
                log.info("cluster: API server version %d.%d", *self.server_version)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - unknown until it answers
                # Unreachable, no credentials, 401: the client logged it once already.
                level = logging.DEBUG if server_wide_failure(exc) else logging.WARNING
                log.log(level, "cluster: cannot read the server version: %s", exc)
            await asyncio.sleep(backoff.next())

    # -- health --
    def fresh(self, max_age: float) -> bool:
        """Every informer synced and heard from (event, bookmark or list) within ``max_age`` s.

        A real API server sends a bookmark to each watch about once a minute, so ``max_age``
        should be comfortably longer than that for quiet resources."""
        now = time.monotonic()
        for informer in self.informers.values():
            age = informer.age(now)
            if not informer.synced or age is None or age > max_age:
                return False
        return True

    def status(self) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        return {name: informer.status(now) for name, informer in self.informers.items()}

    # -- ClusterView: memory only, never awaits --
    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        ns = self.informers[NAMESPACES].get(name)
        return None if ns is None else ns["metadata"]["labels"]

    def nodes(self) -> Sequence[Mapping[str, Any]]:
        """Node projections shaped as Nodes ({"metadata": {name, labels}, "spec": {taints,
        unschedulable}, "status": ...}); the tuple is rebuilt only when a node changed."""
        informer = self.informers[NODES]
        generation, cached = self._nodes
        if generation != informer.generation:
            cached = NodeSet(informer.values())
            self._nodes = (informer.generation, cached)
        return cached

    def priority_class(self, name: str) -> Mapping[str, Any] | None:
        return self.informers[PRIORITY_CLASSES].get(name)

    def supports_match_label_keys(self) -> bool | None:
        if self.match_label_keys_override is not None:
            return self.match_label_keys_override
        if self.server_version is None:
            return None
        return self.server_version >= MATCH_LABEL_KEYS_SINCE
