"""Writing the labeler's labels: only its own keys, only what changed, biggest changes first,
rate-limited, retried.

A change is a JSON merge patch (RFC 7386) of ``metadata.labels`` naming only the labeler's
keys whose value differs, sent with the labeler's field manager: a merge patch never touches
keys it does not name, so another controller's labels (or a person's) are never removed or
rewritten, and no resourceVersion precondition is needed (labels of different owners do not
conflict). A value equal to the node's current one is not sent: a second pass over an
unchanged cluster writes nothing.

Faults: 409 Conflict, 429 TooManyRequests, 5xx and connection errors are retried with
exponential backoff (``attempts`` in all); 404 means the node is gone (skipped); anything else
fails that node's write, counted and logged, and the pass goes on.
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
from webhook.labeler.values import LABELS, NodeLabels

__all__ = ["FIELD_MANAGER", "Change", "PassReport", "RateLimiter", "Writer", "plan"]

log = logging.getLogger(__name__)

FIELD_MANAGER = "label-nodes"
RETRIED = frozenset({409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Change:
    """The labels to set on one node (full keys), with what it carries now."""

    node: str
    labels: dict[str, str]
    current: dict[str, str | None]

    @property
    def magnitude(self) -> float:
        """How far the node's labels move: a label it lacks counts most, then each value's
        change relative to the old one, so the most wrong nodes are written first."""
        total = 0.0
        for key, value in self.labels.items():
            old = self.current.get(key)
            if old is None or not old.lstrip("-").isdigit():
                total += 1e9
            else:
                total += abs(int(value) - int(old)) / max(1, abs(int(old)))
        return total

    def patch(self) -> dict[str, Any]:
        return {"metadata": {"labels": dict(self.labels)}}


def plan(nodes: Mapping[str, Mapping[str, Any]], computed: Iterable[NodeLabels]) -> list[Change]:
    """The writes that bring each node's own labels to the computed values, biggest first."""
    changes: list[Change] = []
    for result in computed:
        node = nodes.get(result.node)
        if node is None or result.problem:
            continue
        labels = (node.get("metadata") or {}).get("labels") or {}
        wanted = {k: v for k, v in result.labels.items() if k in LABELS and labels.get(k) != v}
        if wanted:
            changes.append(Change(result.node, wanted, {k: labels.get(k) for k in wanted}))
    changes.sort(key=lambda c: (-c.magnitude, c.node))
    return changes


class RateLimiter:
    """At most ``rate`` acquisitions a second, evenly spaced (a token bucket of one)."""

    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if rate <= 0:
            raise ValueError("the write rate must be positive")
        self.interval = 1.0 / rate
        self.clock = clock
        self.sleep = sleep
        self._next = 0.0

    async def acquire(self) -> None:
        now = self.clock()
        wait = self._next - now
        self._next = max(now, self._next) + self.interval
        if wait > 0:
            await self.sleep(wait)


@dataclass
class PassReport:
    """What one pass did: nodes seen, written, already right, left out (and why), failed."""

    nodes: int = 0
    written: int = 0
    unchanged: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # node -> why no labels were computed
    failed: dict[str, str] = field(default_factory=dict)  # node -> the write's last error
    gone: int = 0  # nodes deleted before their write
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed


class Writer:
    """Sends changes through ``client`` with the labeler's field manager and rate limit."""

    def __init__(self, client: Client, *, rate: float = 10.0, attempts: int = 4, backoff: float = 0.5,
                 field_manager: str = FIELD_MANAGER, limiter: RateLimiter | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.client = client
        self.limiter = limiter or RateLimiter(rate)
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.field_manager = field_manager
        self.sleep = sleep

    async def apply(self, changes: Iterable[Change], report: PassReport) -> None:
        for change in changes:
            error = await self._write(change)
            if error is None:
                report.written += 1
            elif error == "":
                report.gone += 1
            else:
                report.failed[change.node] = error

    async def _write(self, change: Change) -> str | None:
        """None when written, "" when the node is gone, else the last error."""
        path = f"/api/v1/nodes/{change.node}"
        delay = self.backoff
        last = ""
        for attempt in range(1, self.attempts + 1):
            await self.limiter.acquire()
            try:
                await self.client.patch(path, change.patch(), kind="merge", field_manager=self.field_manager)
                log.info("labelled node", extra={"fields": {"node": change.node, "labels": change.labels,
                                                            "was": change.current}})
                return None
            except ApiError as exc:
                if exc.status == 404:
                    log.info("node gone before its labels were written", extra={"fields": {"node": change.node}})
                    return ""
                last = f"{exc.status} {exc.reason}: {exc.message}".strip()
                if exc.status not in RETRIED:
                    break
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if attempt < self.attempts:
                await self.sleep(delay)
                delay *= 2
        log.warning("could not label node", extra={"fields": {"node": change.node, "error": last}})
        return last
