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
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from webhook.cluster.client import ApiError, Client

__all__ = ["DrainReport", "Evictor", "evictable", "skip_reason"]

log = logging.getLogger(__name__)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
MULTIPLE_PDBS = "more than one PodDisruptionBudget"
RETRIED = frozenset({403, 409, 429, 500, 502, 503, 504})


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
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
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


async def drain_pods(evictor: Evictor, current: Callable[[], list[Mapping[str, Any]]], deadline: float, *,
                     backoff: float = 1.0, max_backoff: float = 10.0,
                     on_result: Callable[[Mapping[str, Any], str, str], Awaitable[None]] | None = None,
                     clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> DrainReport:
    """Evict the pods ``current()`` returns (re-read each round: they come and go) until none
    is left or ``deadline`` (on ``clock``) passes. A pod whose eviction was accepted is not
    evicted again while it terminates; one a PDB blocked is tried again after a backoff that
    grows to ``max_backoff``."""
    report = DrainReport()
    waiting: dict[str, float] = {}  # pod key -> when to try again
    delay: dict[str, float] = {}
    accepted: set[str] = set()
    while True:
        pods = [p for p in current() if _key(p) not in accepted]
        if not pods:
            return report
        now = clock()
        if now >= deadline:
            return report
        due = [p for p in pods if waiting.get(_key(p), 0.0) <= now]
        for pod in due:
            key = _key(pod)
            result, message = await evictor.evict(pod)
            if on_result is not None:
                await on_result(pod, result, message)
            if result in ("evicted", "gone"):
                accepted.add(key)
                (report.evicted if result == "evicted" else report.gone).append(key)
                report.blocked.pop(key, None)
                report.failed.pop(key, None)
                continue
            if result == "failed":
                report.failed[key] = message
                accepted.add(key)  # not retried: a person must act (two PDBs, a forbidden pod)
                continue
            if result == "blocked":
                report.blocked[key] = message
            else:
                report.failed[key] = message
            delay[key] = min(max_backoff, delay.get(key, backoff / 2) * 2)
            waiting[key] = clock() + delay[key]
        nearest = min((waiting.get(_key(p), 0.0) for p in pods if _key(p) not in accepted), default=clock() + 0.5)
        await sleep(max(0.05, min(nearest, deadline) - clock()))


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
