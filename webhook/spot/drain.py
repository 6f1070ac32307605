"""Draining one node through the Eviction API, as ``kubectl drain`` does, so PodDisruptionBudgets hold.

Which pods (``drain.filters.go``'s rules, without the ones that need a person's say): a pod
already terminating (it is leaving), a mirror pod (annotation ``kubernetes.io/config.mirror``:
the kubelet owns it), a DaemonSet pod (its controller would put it back; the node's going
takes it), a finished pod, and pods of excluded namespaces are left alone. Every other pod is
evicted, never deleted: ``POST .../pods/NAME/eviction`` with a ``policy/v1`` Eviction
(``policy/v1beta1`` before 1.22).

What the answers mean (``EvictionREST.Create``, pkg/registry/core/pod/storage/eviction.go):
201 with Status Success: evicted. 404: already gone. 429: a PodDisruptionBudget (or one still
being processed) does not allow it now: retried with backoff until the deadline. A Status of
Failure with code 500, written with HTTP 201: the pod has more than one PDB, which eviction
does not support: not retried (a person must fix the budgets), reported. 403 (a negative
budget or too many unconfirmed disruptions), 409, 5xx and connection errors: retried.

How (``NodeDrain``): as kubectl's ``drain.Helper.evictPods`` (k8s.io/kubectl/pkg/drain/drain.go)
does, every pod has its own worker that evicts it and, on a 429, waits and tries again until
the drain's deadline (its global timeout), so one budget's refusals never hold up another
pod's eviction. Unlike kubectl, at most a bounded number of evictions are in flight at once
(kubectl sends them all; a node holds up to 110 pods), and a blocked pod's wait grows from the
backoff to its cap (kubectl: a fixed 5 s) and ends early when a pod of the same controller
becomes Ready: the replacement that gives the budget room for the next eviction.

One eviction per controller is in flight at a time (pods of different controllers go side by
side). Evictions of one controller's pods meet at its budget: each reads the budget's status
and writes it back one disruption lower (``checkAndDecrement`` in
pkg/registry/core/pod/storage/eviction.go), so of several sent together all but one lose the
write and wait 500 ms in the API server before reading it again (``EvictionsRetry``). An
eviction still waiting there when its sender dies goes on without it: if the budget has room by
then, the API server charges it for the pod and then fails to delete the pod ("context
canceled", a 500), and the budget stays a disruption short until the disruption controller gives
up waiting for that deletion (``DeletionTimeout`` in pkg/controller/disruption, 2 minutes): a
killed leader's drain then stalls. One at a time, a controller's pods never race each other.

Every time comes from one ``Clock`` (Unix time, and waits measured on it), which tests replace.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from webhook.cluster.client import ApiError, Client
from webhook.kube import pods as kube_pods

__all__ = ["SYSTEM_CLOCK", "Clock", "DrainReport", "Evictor", "NodeDrain", "SystemClock", "controller_uid", "evictable",
           "pod_key", "ready", "skip_reason"]

log = logging.getLogger(__name__)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
MULTIPLE_PDBS = "more than one PodDisruptionBudget"
RETRIED = frozenset({403, 409, 429, 500, 502, 503, 504})


class Clock(Protocol):
    """The one clock of the spot controller: Unix time, and waits measured on it."""

    def time(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        """Until ``event`` is set (True) or ``timeout`` seconds have passed (False)."""
        ...


class SystemClock:
    """``time.time`` and the event loop's timers."""

    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        if event.is_set():
            return True
        if timeout <= 0:
            return False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()
        return event.is_set()


SYSTEM_CLOCK = SystemClock()


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def controller_uid(pod: Mapping[str, Any]) -> str:
    """The uid of the pod's controller (its ReplicaSet, StatefulSet...), or ""."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


def ready(pod: Mapping[str, Any] | None) -> bool:
    """The pod's Ready condition is True (what a budget counts as healthy)."""
    for condition in ((pod or {}).get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _owner_kind(pod: Mapping[str, Any]) -> str:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("kind") or "")
    return ""


def skip_reason(pod: Mapping[str, Any], excluded_namespaces: Iterable[str] = ()) -> str | None:
    """Why the drain leaves ``pod`` alone, or None when it is to be evicted."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return "already terminating"
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}) or _owner_kind(pod) == "Node":
        return "a mirror pod"  # a static pod's mirror: the kubelet owns it (controller: its Node)
    if kube_pods.terminal(pod):
        return "finished"
    if _owner_kind(pod) == "DaemonSet":
        return "a DaemonSet pod"
    if str(meta.get("namespace") or "default") in set(excluded_namespaces):
        return "in an excluded namespace"
    return None


def evictable(pods: Iterable[Mapping[str, Any]], excluded_namespaces: Iterable[str] = ()) -> list[Mapping[str, Any]]:
    excluded = tuple(excluded_namespaces)
    return [p for p in pods if skip_reason(p, excluded) is None]


@dataclass
class DrainReport:
    """Per pod key: evicted, gone, blocked (by a PDB, with the API server's words) or failed."""

    evicted: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


class Evictor:
    """Sends Evictions and says what each answer means."""

    def __init__(self, client: Client, *, api_version: str = "policy/v1", dry_run: bool = False) -> None:
        self.client = client
        self.api_version = api_version
        self.dry_run = dry_run

    async def evict(self, pod: Mapping[str, Any]) -> tuple[str, str]:
        """("evicted" | "gone" | "blocked" | "failed" | "retry", message)."""
        meta = pod.get("metadata") or {}
        name, namespace = str(meta.get("name")), str(meta.get("namespace") or "default")
        body: dict[str, Any] = {"apiVersion": self.api_version, "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        params = {"dryRun": "All"} if self.dry_run else None
        if self.dry_run:
            body["deleteOptions"] = {"dryRun": ["All"]}  # propagateDryRun: both must agree
        try:
            answer = await self.client.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body,
                                               params=params)
        except ApiError as exc:
            if exc.status == 404:
                return "gone", "the pod was already gone"
            if exc.status == 429:
                return "blocked", exc.message or "a PodDisruptionBudget does not allow it now"
            if exc.status in RETRIED:
                return "retry", f"{exc.status} {exc.reason}: {exc.message}".strip()
            return "failed", f"{exc.status} {exc.reason}: {exc.message}".strip()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return "retry", f"{type(exc).__name__}: {exc}"
        # The more-than-one-PDB refusal comes back as a Failure Status with HTTP 201.
        if answer.get("kind") == "Status" and answer.get("status") == "Failure":
            return "failed", str(answer.get("message") or "the eviction was refused")
        return "evicted", "evicted"


OnResult = Callable[[Mapping[str, Any], str, str], None]


class NodeDrain:
    """Evicts the pods of one node until none is left or ``deadline`` (Unix time on ``clock``)
    passes; see the module docstring. ``slots`` bounds the evictions in flight (shared by every
    drain of a controller); ``on_result(pod, result, message)`` hears of each answer and must
    not block. The controller tells it of pods that come (``offer``), go (``offer(key, None)``)
    and become Ready elsewhere (``ready``)."""

    def __init__(self, evictor: Evictor, deadline: float, *, clock: Clock, slots: asyncio.Semaphore,
                 backoff: float = 1.0, max_backoff: float = 10.0, on_result: OnResult | None = None) -> None:
        self.evictor = evictor
        self.deadline = deadline
        self.clock = clock
        self.slots = slots
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.on_result = on_result
        self.report = DrainReport()
        self.pending: dict[str, Mapping[str, Any]] = {}  # pods still to evict, by key
        self.settled: set[str] = set()  # evicted, gone, or refused for good: never tried again
        self.workers: dict[str, asyncio.Task[None]] = {}
        self.kicks: dict[str, asyncio.Event] = {}
        # Blocked pods by (namespace, controller uid), in the order they were blocked.
        self.blocked_kin: dict[tuple[str, str], dict[str, None]] = {}
        self.asking: set[str] = set()  # pods whose eviction is in flight
        self.turns: dict[tuple[str, str], asyncio.Lock] = {}  # one eviction in flight per controller
        self.left: set[str] = set()  # of those, the ones seen leaving the node meanwhile
        self.empty = asyncio.Event()
        self.running = False

    def offer(self, key: str, pod: Mapping[str, Any] | None) -> None:
        """A pod to evict (new or changed), or None: it left the node or is not to be evicted now."""
        if pod is None:
            if key in self.asking:
                self.left.add(key)  # its answer, on its way (the watch can outrun it), settles it
            else:
                self._drop(key)
            return
        if key in self.settled:
            return
        self.left.discard(key)
        self.pending[key] = pod
        self.empty.clear()
        worker = self.workers.get(key)
        if self.running and (worker is None or worker.done()):
            self.workers[key] = asyncio.create_task(self._evict(key), name=f"evict {key}")

    def ready(self, namespace: str, uid: str) -> None:
        """A pod of controller ``uid`` became Ready: the first pod of that controller a budget
        blocked is tried again now instead of at the end of its backoff."""
        waiting = self.blocked_kin.get((namespace, uid))
        if waiting:
            key = next(iter(waiting))
            del waiting[key]
            self._kick(key)

    async def run(self, pods: Iterable[Mapping[str, Any]]) -> DrainReport:
        """Evict ``pods`` (and those offered meanwhile); the report once all are settled or at the deadline."""
        for pod in _round_robin(pods):
            self.offer(pod_key(pod), pod)
        self.running = True
        for key in self.pending:
            self.workers[key] = asyncio.create_task(self._evict(key), name=f"evict {key}")
        try:
            if self.pending:
                await self.clock.wait(self.empty, self.deadline - self.clock.time())
        finally:
            self.running = False
            workers = [w for w in self.workers.values() if not w.done()]
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        return self.report

    def _drop(self, key: str) -> None:
        """The pod left without an answer that settles it: not asked about again, not reported."""
        self.left.discard(key)
        if self.pending.pop(key, None) is not None:
            self.report.blocked.pop(key, None)
            self.report.failed.pop(key, None)
            self._kick(key)  # its worker ends at once
            if not self.pending:
                self.empty.set()

    def _kick(self, key: str) -> None:
        kick = self.kicks.get(key)
        if kick is not None:
            kick.set()

    async def _evict(self, key: str) -> None:
        """One pod's worker: ask until an answer settles it, waiting between refusals."""
        delay = self.backoff
        kick = self.kicks[key] = asyncio.Event()
        first = True
        while key in self.pending:
            pod = self.pending[key]
            kin = (str((pod.get("metadata") or {}).get("namespace") or "default"), controller_uid(pod))
            # The controller's turn is held until its answer is taken in: the next pod of the
            # controller sees it blocked (and defers) or settled.
            async with self._turn(kin), self.slots:
                if key not in self.pending:  # it left while waiting for a slot
                    return
                answer = None if first and self._defer(key, kin) else await self._ask(key, pod)
                first = False
                if answer is not None and self._settled_by(key, pod, *answer):
                    return
                if key in self.left:
                    self._drop(key)
                    return
                if (answer is None or answer[0] == "blocked") and kin[1]:
                    self.blocked_kin.setdefault(kin, {})[key] = None
            kick.clear()
            await self.clock.wait(kick, delay)
            self.blocked_kin.get(kin, {}).pop(key, None)
            delay = min(self.max_backoff, delay * 2)

    def _turn(self, kin: tuple[str, str]) -> contextlib.AbstractAsyncContextManager[Any]:
        """The controller's turn to have an eviction in flight (a pod without one needs none)."""
        if not kin[1]:
            return contextlib.nullcontext()
        return self.turns.setdefault(kin, asyncio.Lock())

    async def _ask(self, key: str, pod: Mapping[str, Any]) -> tuple[str, str]:
        self.asking.add(key)
        try:
            return await self.evictor.evict(pod)
        finally:
            self.asking.discard(key)

    def _defer(self, key: str, kin: tuple[str, str]) -> bool:
        """A first try while a pod of the same controller is blocked would only be refused by
        the same budget: the pod waits with that one instead (tried at its own backoff, or
        sooner when a pod of the controller becomes Ready), kept by the budget's last words."""
        blocked = self.blocked_kin.get(kin) if kin[1] else None
        if not blocked:
            return False
        self.report.blocked[key] = self.report.blocked.get(next(iter(blocked)), "") or \
            "a PodDisruptionBudget does not allow it now"
        return True

    def _settled_by(self, key: str, pod: Mapping[str, Any], result: str, message: str) -> bool:
        """Take in an answer; True when it settles the pod (evicted, gone, or refused for good)."""
        if self.on_result is not None:
            self.on_result(pod, result, message)
        if result in ("evicted", "gone", "failed"):
            self._settle(key, result, message)
            return True
        now, before = (self.report.blocked, self.report.failed) if result == "blocked" else \
            (self.report.failed, self.report.blocked)
        now[key] = message  # the last answer says why the pod is still here
        before.pop(key, None)
        return False

    def _settle(self, key: str, result: str, message: str) -> None:
        self.settled.add(key)
        self.left.discard(key)
        self.pending.pop(key, None)
        self.report.blocked.pop(key, None)
        if result == "failed":
            self.report.failed[key] = message  # not retried: a person must act (two PDBs, a forbidden pod)
        else:
            self.report.failed.pop(key, None)
            (self.report.evicted if result == "evicted" else self.report.gone).append(key)
        if not self.pending:
            self.empty.set()


def _round_robin(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods in turns over their controllers (first pod of each, then second of each...), so
    that the evictions in flight spread over many budgets and each budget's first answer comes
    back before its next pod is tried."""
    by_controller: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for pod in pods:
        uid = controller_uid(pod) or pod_key(pod)  # a pod without a controller is a group of its own
        by_controller.setdefault((str((pod.get("metadata") or {}).get("namespace")), uid), []).append(pod)
    groups = list(by_controller.values())
    return [group[i] for i in range(max(map(len, groups), default=0)) for group in groups if i < len(group)]
