"""The object store: one global resourceVersion counter (etcd's revision), one table per storage
resource keyed like etcd (``<namespace>/<name>`` or ``<name>``, listed in key order), and a bounded
event history per table.

The history plays the part of both etcd's MVCC window and the watch cache:
  * a watch from resourceVersion X replays the table's events after X, and is "too old" when
    X < oldest-1 (staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go,
    getAllEventsSinceLocked: ``NewResourceExpired("too old resource version: %d (%d)")``);
  * a list at an exact resourceVersion R (a continue token, or resourceVersionMatch=Exact) is the
    current state rolled back through the events after R, and fails like a compacted etcd read
    when those events are gone (storage/etcd3/errors.go, interpretListError).
Stored objects are plain dicts without kind/apiVersion and are never mutated once stored: every
write stores a new dict, so readers may hold references without copying.
"""
from __future__ import annotations

import asyncio
import heapq
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

JSON = dict[str, Any]
ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(frozen=True)
class Event:
    rv: int
    type: str
    key: str
    obj: JSON  # the new state; for DELETED the last state stamped with the deletion's resourceVersion
    prev: JSON | None  # the state before the event (None for ADDED)


class FellBehind(Exception):
    """A watcher whose next event was dropped from the bounded history."""


@dataclass(eq=False)
class Watcher:
    cursor: int
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False


def stamp(obj: JSON, rv: int) -> JSON:
    """A shallow copy of ``obj`` whose metadata.resourceVersion is ``rv``."""
    out = dict(obj)
    out["metadata"] = {**(obj.get("metadata") or {}), "resourceVersion": str(rv)}
    return out


def object_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class Table:
    def __init__(self, capacity: int) -> None:
        self.objects: dict[str, JSON] = {}
        self._sorted: list[str] = []
        self._pending_add: set[str] = set()
        self._pending_remove: set[str] = set()
        self.events: list[Event] = []
        self.event_rvs: list[int] = []
        self.base = 0  # absolute index of events[0]
        self.floor = 0  # reads at a resourceVersion below this are too old
        self.capacity = capacity
        self.watchers: set[Watcher] = set()
        self._encoded_of: dict[str, JSON] = {}
        self._encoded: dict[str, bytes] = {}

    def encoded(self, key: str, obj: JSON) -> bytes:
        """``obj`` as JSON, cached while it is the stored object of ``key`` (stored dicts never change)."""
        if self._encoded_of.get(key) is obj:
            return self._encoded[key]
        data = msgspec.json.encode(obj)
        if self.objects.get(key) is obj:
            self._encoded_of[key] = obj
            self._encoded[key] = data
        return data

    # -- key order --
    def _add_key(self, key: str) -> None:
        if key in self._pending_remove:
            self._pending_remove.discard(key)
        else:
            self._pending_add.add(key)

    def _remove_key(self, key: str) -> None:
        if key in self._pending_add:
            self._pending_add.discard(key)
        else:
            self._pending_remove.add(key)

    def sorted_keys(self) -> list[str]:
        if self._pending_remove:
            gone = self._pending_remove
            self._sorted = [k for k in self._sorted if k not in gone]
            self._pending_remove = set()
        if self._pending_add:
            # two sorted runs: Timsort merges them in linear time
            self._sorted = sorted(self._sorted + sorted(self._pending_add))
            self._pending_add = set()
        return self._sorted

    def keys_from(self, start: str, prefix: str, extra: list[str] | None = None) -> Iterator[str]:
        """Keys >= start (and with the namespace prefix), in etcd order, merged with the ``extra``
        keys (those of an older snapshot that no longer exist)."""
        keys = self.sorted_keys()
        lo = bisect_left(keys, max(start, prefix))

        def current() -> Iterator[str]:
            for i in range(lo, len(keys)):
                key = keys[i]
                if prefix and not key.startswith(prefix):
                    return
                yield key

        gone = sorted(k for k in extra or () if k >= start and k.startswith(prefix) and k not in self.objects)
        yield from heapq.merge(current(), gone) if gone else current()

    # -- history --
    def record(self, event: Event) -> None:
        self.events.append(event)
        self.event_rvs.append(event.rv)
        if len(self.events) > self.capacity + self.capacity // 4:
            drop = len(self.events) - self.capacity
            del self.events[:drop]
            del self.event_rvs[:drop]
            self.base += drop
            self.floor = max(self.floor, self.events[0].rv - 1)

    def compact(self, rv: int) -> None:
        self.base += len(self.events)
        self.events.clear()
        self.event_rvs.clear()
        self.floor = rv

    def too_old(self, rv: int) -> bool:
        return rv < self.floor

    def state_at(self, rv: int) -> dict[str, JSON | None]:
        """For every key written after ``rv``: its state at ``rv`` (None: it did not exist)."""
        over: dict[str, JSON | None] = {}
        for ev in self.events[bisect_right(self.event_rvs, rv):]:
            if ev.key not in over:
                over[ev.key] = None if ev.type == ADDED else ev.prev
        return over

    def subscribe(self, after_rv: int) -> Watcher:
        watcher = Watcher(cursor=self.base + bisect_right(self.event_rvs, after_rv))
        self.watchers.add(watcher)
        return watcher

    def drain(self, watcher: Watcher) -> list[Event]:
        if watcher.cursor < self.base:
            raise FellBehind()
        out = self.events[watcher.cursor - self.base:]
        watcher.cursor = self.base + len(self.events)
        return out


class Store:
    def __init__(self, history: int = 50_000) -> None:
        self.lock = threading.RLock()
        self.rv = 0
        self.history = history
        self.tables: dict[tuple[str, str], Table] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._wake_pending: set[tuple[str, str]] = set()

    def table(self, storage: tuple[str, str]) -> Table:
        tab = self.tables.get(storage)
        if tab is None:
            tab = self.tables[storage] = Table(self.history)
        return tab

    def bind_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.loop = loop
        self._loop_thread = threading.get_ident() if loop else None

    def in_loop_thread(self) -> bool:
        return self._loop_thread == threading.get_ident()

    # -- writes (callers hold the lock) --
    def put(self, storage: tuple[str, str], key: str, obj: JSON, prev: JSON | None) -> JSON:
        """Store ``obj`` (a fresh dict the store now owns) at a new resourceVersion."""
        self.rv += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        tab = self.table(storage)
        if key not in tab.objects:
            tab._add_key(key)
        tab.objects[key] = obj
        tab.record(Event(self.rv, MODIFIED if prev is not None else ADDED, key, obj, prev))
        self._wake(storage, tab)
        return obj

    def remove(self, storage: tuple[str, str], key: str) -> JSON:
        tab = self.table(storage)
        prev = tab.objects.pop(key)
        tab._encoded_of.pop(key, None)
        tab._encoded.pop(key, None)
        tab._remove_key(key)
        self.rv += 1
        tab.record(Event(self.rv, DELETED, key, stamp(prev, self.rv), prev))
        self._wake(storage, tab)
        return prev

    def compact(self) -> int:
        with self.lock:
            for tab in self.tables.values():
                tab.compact(self.rv)
            return self.rv

    # -- watch wake-ups, from any thread --
    def _wake(self, storage: tuple[str, str], tab: Table) -> None:
        if not tab.watchers:
            return
        if self.loop is None or self.in_loop_thread():
            for w in tab.watchers:
                w.wake.set()
            return
        if storage not in self._wake_pending:
            self._wake_pending.add(storage)
            try:
                self.loop.call_soon_threadsafe(self._wake_in_loop)
            except RuntimeError:  # loop closed
                pass

    def _wake_in_loop(self) -> None:
        with self.lock:
            pending, self._wake_pending = self._wake_pending, set()
            watchers = [w for s in pending for w in self.table(s).watchers]
        for w in watchers:
            w.wake.set()

    def unsubscribe(self, storage: tuple[str, str], watcher: Watcher) -> None:
        with self.lock:
            self.table(storage).watchers.discard(watcher)
