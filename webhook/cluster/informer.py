"""An informer: a LIST+WATCH-backed, in-memory map of one resource, as client-go's Reflector keeps it.

The loop follows ``tools/cache/reflector.go`` (``ListAndWatch`` / ``watchHandler``):

* LIST in pages (``tools/pager``, 500 per page) at resourceVersion "0" the first time, at ""
  (a quorum read) after the watch's resourceVersion expired (``relistResourceVersion`` with
  ``isLastSyncResourceVersionUnavailable``); the list's resourceVersion starts the watch.
* WATCH with ``allowWatchBookmarks`` and ``timeoutSeconds`` random in [t, 2t) (``minWatchTimeout``
  5 min), resuming from the last resourceVersion seen (events and bookmarks) whenever a stream
  ends or breaks — no relist.
* 410 Gone / Expired (``isExpiredError``) on the watch: relist.
* Any other failure: wait with ``wait.NewExponentialBackoffManager(800ms, 30s, 2min, 2.0, 1.0)``
  (the reflector's backoffManager) and try again, for ever. A watch that ends at once without an
  event counts as a failure too (watchHandler's "very short watch"), so a server that accepts
  and closes at once cannot make the loop spin.

The store holds ``project(obj)`` (a small dict of the fields users need), never whole objects.
A relist replaces the whole store at once (``DeltaFIFO.Replace``): objects missing from the list
are removed. Readers only ever see a complete snapshot; nothing here blocks the event loop for
longer than decoding and projecting one page or one event.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from .client import PAGE_SIZE, ApiError, Client, Expired, describe, transport_cause
from .credentials import CredentialError

log = logging.getLogger(__name__)

Object = Mapping[str, Any]
Projected = dict[str, Any]
Projection = Callable[[Object], Projected]
ChangeHandler = Callable[[str, "Projected | None", "Projected | None"], None]


@dataclass(frozen=True)
class BackoffPolicy:
    """wait.NewExponentialBackoffManager's parameters, in seconds: the first step, the cap, the
    growth factor, the jitter, and the quiet time after which the steps start again."""

    initial: float
    cap: float
    factor: float
    jitter: float
    reset_after: float


# The reflector's, as NewReflector passes them: NewExponentialBackoffManager(800ms, 30s, 2min,
# 2.0, 1.0) ("if we don't backoff for 2min, assume API server is healthy").
REFLECTOR_BACKOFF = BackoffPolicy(initial=0.8, cap=30.0, factor=2.0, jitter=1.0, reset_after=120.0)


class Backoff:
    """exponentialBackoffManagerImpl.getNextBackoff: jittered exponential steps, reset when the
    previous backoff started more than ``reset_after`` ago (the cluster was healthy since)."""

    def __init__(self, policy: BackoffPolicy = REFLECTOR_BACKOFF, *, clock: Callable[[], float] = time.monotonic,
                 rand: Callable[[], float] = random.random) -> None:
        self.policy = policy
        self._clock = clock
        self._rand = rand
        self._step = policy.initial
        self._last: float | None = None

    def next(self) -> float:
        now, p = self._clock(), self.policy
        if self._last is None or now - self._last > p.reset_after:
            self._step = p.initial
        self._last = now
        duration = self._step
        self._step = min(self._step * p.factor, p.cap)
        # wait.Jitter: duration + rand * jitter * duration, so [30, 60) s at the cap
        return duration + self._rand() * p.jitter * duration if p.jitter > 0 else duration


class _ShortWatch(Exception):
    """The watch ended at once with no event (watchHandler's "very short watch")."""


def server_wide_failure(exc: BaseException) -> bool:
    """No answer, no credentials, or 401: the same for every request, logged by the client."""
    return (transport_cause(exc) is not None or isinstance(exc, CredentialError)
            or (isinstance(exc, ApiError) and exc.status == 401))


def object_key(obj: Object) -> str:
    """MetaNamespaceKeyFunc: "namespace/name", or "name" for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


class Informer:
    """One resource, listed and watched for ever by ``run()``; read from memory at any time."""

    def __init__(self, client: Client, resource_path: str, project: Projection, *, name: str,
                 page_size: int = PAGE_SIZE, watch_timeout: float = 300.0,
                 backoff: BackoffPolicy = REFLECTOR_BACKOFF, min_watch_duration: float = 1.0,
                 on_change: ChangeHandler | None = None) -> None:
        self.client = client
        self.path = resource_path
        self.project = project
        self.name = name
        self.page_size = page_size
        self.watch_timeout = watch_timeout  # seconds; each watch asks for [t, 2t)
        self.backoff_policy = backoff
        self.min_watch_duration = min_watch_duration
        self._handlers: list[ChangeHandler] = [on_change] if on_change else []
        self._store: dict[str, Projected] = {}
        self.resource_version = ""  # the last one seen: list, event or bookmark
        self.synced = False
        self.synced_event = asyncio.Event()
        self.last_event: float | None = None  # monotonic time the API server was last heard from
        self.generation = 0  # bumped on every change of the store (for derived caches)
        self.events = 0  # ADDED / MODIFIED / DELETED events applied
        self.bookmarks = 0
        self.lists = 0  # complete LISTs
        self.relists = 0  # complete LISTs after the first
        self.errors = 0
        self.last_error = ""
        self.last_exception: BaseException | None = None  # the error behind last_error (its status, for callers)
        self.watching = False  # a watch stream is open (the API server answered it)

    # -- reading (never awaits) --
    def get(self, key: str) -> Projected | None:
        return self._store.get(key)

    def keys(self) -> Iterator[str]:
        return iter(list(self._store))

    def values(self) -> list[Projected]:
        return list(self._store.values())

    def __len__(self) -> int:
        return len(self._store)

    def add_handler(self, handler: ChangeHandler) -> None:
        """``handler(key, old, new)`` after every change (None for absent); must not block."""
        self._handlers.append(handler)

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the store was last known current (None: never): 0 while a watch is
        open, since an open watch delivers every change (a quiet cluster sends no events, and
        older API servers bookmark only near a watch's deadline); else since the API server
        was last heard from. A connection that dies silently is noticed at the watch's
        timeout, which the client bounds."""
        if self.last_event is None:
            return None
        if self.watching:
            return 0.0
        return (time.monotonic() if now is None else now) - self.last_event

    # -- the loop --
    async def run(self) -> None:
        """List, then watch, for ever (until cancelled)."""
        backoff = Backoff(self.backoff_policy)
        list_rv: str | None = "0"  # None: no list needed, watch from self.resource_version
        while True:
            try:
                if list_rv is not None:
                    await self._list(list_rv)
                    list_rv = None
                await self._watch()
                continue  # the stream ended: resume from the last resourceVersion
            except asyncio.CancelledError:
                raise
            except Expired as exc:
                if list_rv is None:  # the watch's resourceVersion is gone: relist from etcd
                    log.info("informer %s: %s; relisting", self.name, exc)
                    list_rv = ""
                    continue
                list_rv = ""  # an expired continue token: start the list again, after a backoff
                self._failed(exc)
            except _ShortWatch as exc:
                self._failed(exc)
            except Exception as exc:  # noqa: BLE001 - an informer never gives up
                self._failed(exc)
            await asyncio.sleep(backoff.next())

    def _failed(self, exc: BaseException) -> None:
        """Count and keep the failure; log it once per distinct cause, not on every retry. A
        cause that concerns the API server as a whole (unreachable, no credentials, 401) is in
        the client's own log line once for all informers, and is kept here in the same words."""
        self.errors += 1
        server_wide = server_wide_failure(exc)
        text = describe(exc, self.client.config.host) if server_wide else f"{type(exc).__name__}: {exc}"
        repeated = text == self.last_error
        self.last_error = text
        self.last_exception = exc
        log.log(logging.DEBUG if server_wide or repeated else logging.WARNING, "informer %s: %s", self.name, text)

    async def _list(self, resource_version: str) -> None:
        fresh: dict[str, Projected] = {}
        list_rv = ""
        params = {"resourceVersion": resource_version} if resource_version else {}
        async for page in self.client.list_pages(self.path, params, limit=self.page_size):
            for obj in page.get("items") or ():
                projected = self._project(obj)
                if projected is not None:
                    fresh[object_key(obj)] = projected
            list_rv = str((page.get("metadata") or {}).get("resourceVersion") or list_rv)
        self._replace(fresh)
        self.resource_version = list_rv
        self.last_event = time.monotonic()
        self.lists += 1
        if self.lists > 1:
            self.relists += 1
        if not self.synced:
            self.synced = True
            self.synced_event.set()
            log.info("informer %s: synced %d objects at resourceVersion %s", self.name, len(fresh), list_rv)

    async def _watch(self) -> None:
        started, seen = time.monotonic(), 0
        timeout = int(self.watch_timeout * (1.0 + random.random())) or 1
        stream = self.client.watch(self.path, self.resource_version, allow_bookmarks=True, timeout_seconds=timeout,
                                   on_open=self._opened)
        try:
            async for kind, obj in stream:
                seen += 1
                self._apply(kind, obj)
        except aiohttp.ClientPayloadError as exc:
            # The stream was cut mid-response: the watch channel closes; resume from the last
            # resourceVersion seen, as watchHandler does when ResultChan closes.
            log.info("informer %s: watch stream broken (%s); resuming at %s", self.name, exc, self.resource_version)
        finally:
            if self.watching:
                self.watching = False
                self.last_event = time.monotonic()  # current until this instant
        if seen == 0 and time.monotonic() - started < self.min_watch_duration:
            raise _ShortWatch(f"very short watch: {self.path}: unexpected watch close - "
                              "watch lasted less than a second and no items received")

    def _apply(self, kind: str, obj: Object) -> None:
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        self.last_event = time.monotonic()
        if kind == "BOOKMARK":  # only the resourceVersion moves (reflector watchHandler)
            self.bookmarks += 1
        elif kind in ("ADDED", "MODIFIED"):
            projected = self._project(obj)
            if projected is not None:
                self._set(object_key(obj), projected)
            self.events += 1
        elif kind == "DELETED":
            key = object_key(obj)
            old = self._store.pop(key, None)
            if old is not None:
                self.generation += 1
                self._notify(key, old, None)
            self.events += 1
        else:
            log.warning("informer %s: unknown watch event type %r", self.name, kind)
        if rv:
            self.resource_version = rv

    # -- store updates --
    def _opened(self) -> None:
        self.watching = True

    def _project(self, obj: Object) -> Projected | None:
        try:
            return self.project(obj)
        except Exception as exc:  # noqa: BLE001 - one odd object must not stop the informer
            self._failed(exc)
            return None

    def _set(self, key: str, projected: Projected) -> None:
        old = self._store.get(key)
        if old == projected:
            return  # e.g. a heartbeat that changed nothing the projection keeps
        self._store[key] = projected
        self.generation += 1
        self._notify(key, old, projected)

    def _replace(self, fresh: dict[str, Projected]) -> None:
        """DeltaFIFO.Replace: the list is the whole truth; swap it in at once, then notify."""
        old_store, self._store = self._store, fresh
        changes: list[tuple[str, Projected | None, Projected | None]] = [
            (k, old_store.get(k), v) for k, v in fresh.items() if old_store.get(k) != v]
        changes += [(k, v, None) for k, v in old_store.items() if k not in fresh]
        if changes or not self.synced:
            self.generation += 1
        for key, old, new in changes:
            self._notify(key, old, new)

    def _notify(self, key: str, old: Projected | None, new: Projected | None) -> None:
        for handler in self._handlers:
            try:
                handler(key, old, new)
            except Exception:  # a handler's bug must not stop the informer
                log.exception("informer %s: change handler failed for %s", self.name, key)

    def status(self, now: float | None = None) -> dict[str, Any]:
        age = self.age(now)
        return {"synced": self.synced, "objects": len(self._store), "events": self.events,
                "bookmarks": self.bookmarks, "relists": self.relists, "errors": self.errors,
                "resource_version": self.resource_version,
                "seconds_since_last_event": None if age is None else round(age, 3),
                "last_error": self.last_error}

