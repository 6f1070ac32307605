"""The status of every PlacementPolicy object, written by one replica: the one holding the Lease
(``runtime.leader``, client-go's rules), so that replicas never fight over it.

The leader computes each object's status (``policy.status.desired``) from the set in force and
writes it only when it differs from the object's, with a merge patch of the ``status``
subresource under the field manager ``placement-webhook``. A pass runs when the set was assembled
again, when an object's status changed under it (someone else wrote it), and every ``interval``
seconds (the changed-object counts move with every review; they are written at that pace, not
per review). A write that fails is retried with an exponential backoff per object and logged once
per distinct cause; it never stops the server. A replica that loses the Lease stops writing and
stands for it again (``server.leading``): only the leader-only work depends on the Lease, admission never does.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from webhook.cluster.client import ApiError, Client, describe
from webhook.cluster.informer import Backoff, BackoffPolicy, Informer
from webhook.kube.times import format_time
from webhook.policy import status as policy_status
from webhook.policy.sources import generation as object_generation
from webhook.runtime import sync
from webhook.server.policies import PATH, PolicySources

__all__ = ["FIELD_MANAGER", "INTERVAL", "StatusWriter"]

log = logging.getLogger(__name__)

FIELD_MANAGER = "placement-webhook"
INTERVAL = 10.0  # seconds between passes that write the changed-object counts
WRITE_BACKOFF = BackoffPolicy(initial=0.5, cap=30.0, factor=2.0, jitter=0.2, reset_after=120.0)


def _now() -> str:
    return format_time(datetime.now(UTC))


class StatusWriter:
    """Writes the status of the objects ``informer`` keeps, from what ``sources`` assembled."""

    def __init__(self, client: Client, sources: PolicySources, informer: Informer, *,
                 clock: Callable[[], float] = time.monotonic, now: Callable[[], str] = _now,
                 backoff: BackoffPolicy = WRITE_BACKOFF, on_write: Callable[[str], None] | None = None) -> None:
        self.client = client
        self.sources = sources
        self.informer = informer
        self.wake = asyncio.Event()
        self._clock = clock
        self._now = now
        self._backoff_policy = backoff
        self._on_write = on_write
        self._written: dict[str, dict[str, Any]] = {}  # the status last written per object
        self._retry: dict[str, tuple[float, Backoff]] = {}  # when a failed write may be tried again
        self._last_error: dict[str, str] = {}

    # -- what each object's status should be --
    def wanted(self, obj: Mapping[str, Any], *, now: str | None = None) -> dict[str, Any] | None:
        """The status ``obj`` should have (a transition at ``now``, default the clock's); None while
        the set was not assembled from its generation."""
        assembled = self.sources.assembled
        name = str((obj.get("metadata") or {}).get("name") or "")
        at = object_generation(obj)
        if assembled is None or assembled.generations.get(name) != at:
            return None
        left = assembled.left_out.get(name)
        return policy_status.desired(
            obj.get("status"), generation=at, reason=left.reason if left else None,
            errors=left.errors if left else (), changed=self.sources.changed_objects(name, at),
            now=now if now is not None else self._now())

    def status_changed(self, key: str, new: Mapping[str, Any] | None) -> None:
        """The informer saw ``key``'s status change: someone else's write is rewritten, our own is not."""
        written = self._written.get(key)
        if written is not None and (new is None or policy_status.differs((new or {}).get("status"), written)):
            del self._written[key]
        self.wake.set()

    # -- writing --
    async def write_all(self) -> int:
        """One pass: write every status that differs; the number of writes that failed."""
        failed, now = 0, self._now()  # one transition time for the pass: one clock read, not one per object
        for obj in self.informer.values():
            name = str((obj.get("metadata") or {}).get("name") or "")
            wanted = self.wanted(obj, now=now)
            if not name or wanted is None or not self._due(name):
                continue
            if not policy_status.differs(obj.get("status"), wanted) or self._written.get(name) == wanted:
                continue
            failed += not await self._write(name, wanted)
        return failed

    def _due(self, name: str) -> bool:
        retry = self._retry.get(name)
        return retry is None or retry[0] <= self._clock()

    async def _write(self, name: str, wanted: dict[str, Any]) -> bool:
        try:
            await self.client.patch(f"{PATH}/{name}/status", {"status": wanted}, kind="merge",
                                    field_manager=FIELD_MANAGER)
        except asyncio.CancelledError:
            raise
        except ApiError as exc:
            if exc.status == 404:  # deleted meanwhile: nothing to write
                self._forget(name)
                return True
            return self._failed(name, exc)
        except Exception as exc:  # noqa: BLE001 - unreachable, timeouts: retried
            return self._failed(name, exc)
        self._written[name] = wanted
        self._forget(name)
        if self._on_write is not None:
            self._on_write("success")
        return True

    def _failed(self, name: str, exc: BaseException) -> bool:
        _, backoff = self._retry.get(name) or (0.0, Backoff(self._backoff_policy, clock=self._clock))
        delay = backoff.next()
        self._retry[name] = (self._clock() + delay, backoff)
        text = describe(exc, self.client.config.host)
        level = logging.DEBUG if self._last_error.get(name) == text else logging.WARNING
        self._last_error[name] = text
        log.log(level, "status of PlacementPolicy %s not written, retrying in %.1f s: %s", name, delay, text)
        if self._on_write is not None:
            self._on_write("failure")
        return False

    def _forget(self, name: str) -> None:
        self._retry.pop(name, None)
        if self._last_error.pop(name, None):
            log.info("status of PlacementPolicy %s written again", name)

    def next_retry(self) -> float | None:
        """Seconds until the earliest retry is due (None: none is waiting)."""
        if not self._retry:
            return None
        return max(0.0, min(at for at, _ in self._retry.values()) - self._clock())

    async def run(self, stop: asyncio.Event, *, interval: float = INTERVAL) -> None:
        """Write passes until ``stop``: at once, then on ``wake``, on a retry's time, every ``interval`` s."""
        self._written.clear()  # a new term: trust only what the objects say
        while not stop.is_set():
            self.wake.clear()
            await self.write_all()
            retry = self.next_retry()
            timeout = interval if retry is None else min(interval, retry)
            await sync.first(stop, self.wake, timeout=timeout)

