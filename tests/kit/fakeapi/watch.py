"""WATCH: a chunked ``application/json`` response of newline-delimited ``{"type","object"}`` events
(staging/src/k8s.io/apiserver/pkg/endpoints/handlers/watch.go; JSON keeps the plain media type,
only other serializers get ``;stream=watch``).

  * resourceVersion unset or "0": synthetic ADDED events for the current objects, then changes
    (API concepts, "Semantics for watch"); a value: the events after it from the history; a value
    older than the retained history: HTTP 200 and one ERROR event carrying
    Status{410, Expired, "too old resource version: X (oldest-1)"} (cacher.Watch returns
    newErrWatcher for getAllEventsSinceLocked's NewResourceExpired).
  * selectors: cacheWatcher.convertToWatchEvent — an object that starts matching is ADDED, one
    that stops matching is DELETED with its previous content stamped with the event's
    resourceVersion, a deletion is DELETED with the last state.
  * allowWatchBookmarks: BOOKMARK events whose object is the empty object of the watched kind with
    only metadata.resourceVersion set (for pods exactly what a real server sends:
    ``"spec":{"containers":null},"status":{}``); never without the parameter.
  * sendInitialEvents (WatchList, beta and on by default from 1.32) with resourceVersionMatch
    NotOlderThan: initial events, then a bookmark annotated ``k8s.io/initial-events-end: "true"``.
  * timeoutSeconds ends the stream cleanly; without it the server picks
    minRequestTimeout * (1 + rand) like the watch handler.
"""
from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from .discovery import Resource, from_storage
from .errors import FieldError, options_invalid, resource_expired
from .listing import ListQuery, parse_int, parse_rv
from .selectors import parse_list_selectors
from .store import DELETED, MODIFIED, FellBehind, Store, stamp

JSON = dict[str, Any]
BATCH = 500


@dataclass
class WatchQuery:
    q: ListQuery
    rv: str
    bookmarks: bool
    timeout: float
    send_initial: bool | None


def _bool(text: str | None) -> bool | None:
    if text is None:
        return None
    return text.lower() in ("true", "1")


def parse_watch(res: Resource, namespace: str | None, query: Mapping[str, str], minor: int,
                default_timeout: float | None) -> WatchQuery:
    """validateWatchOptions (internalversion/validation) plus the watch handler's timeout."""
    labels, fields = parse_list_selectors(res, query.get("labelSelector", ""), query.get("fieldSelector", ""))
    send = _bool(query.get("sendInitialEvents"))
    match = query.get("resourceVersionMatch", "")
    errs: list[FieldError] = []
    if send is not None:
        if match != "NotOlderThan":
            errs.append(FieldError("FieldValueForbidden", "resourceVersionMatch",
                                   "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
        if minor < 32:
            errs.append(FieldError("FieldValueForbidden", "sendInitialEvents",
                                   "sendInitialEvents is forbidden for watch unless the WatchList feature gate is "
                                   "enabled"))
    if match:
        if send is None:
            errs.append(FieldError("FieldValueForbidden", "resourceVersionMatch",
                                   "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
        if match != "NotOlderThan":
            errs.append(FieldError("FieldValueNotSupported", "resourceVersionMatch", 'supported values: "NotOlderThan"',
                                   match))
    if errs:
        raise options_invalid("ListOptions", errs)
    raw_timeout = query.get("timeoutSeconds", "")
    if raw_timeout:
        timeout = float(parse_int(query, "timeoutSeconds"))
    elif default_timeout is not None:
        timeout = default_timeout
    else:
        timeout = 1800.0 * (random.random() + 1.0)
    rv = query.get("resourceVersion", "")
    if rv not in ("", "0"):
        parse_rv(rv)
    return WatchQuery(ListQuery(namespace, labels, fields), rv, bool(_bool(query.get("allowWatchBookmarks"))),
                      timeout, send)


def encode_object(res: Resource, api_version: str, obj: JSON) -> bytes:
    body = msgspec.json.encode(from_storage(res, obj))
    head = b'{"kind":"' + res.kind.encode() + b'","apiVersion":"' + api_version.encode() + b'"'
    return head + (b"," + body[1:] if body != b"{}" else b"}")


def encode_event(kind: str, payload: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + payload + b"}\n"


def bookmark(res: Resource, api_version: str, rv: int, initial_end: bool = False) -> bytes:
    meta: JSON = {"resourceVersion": str(rv), "creationTimestamp": None}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj: JSON = {"kind": res.kind, "apiVersion": api_version, "metadata": meta}
    if res.kind == "Pod":
        obj.update({"spec": {"containers": None}, "status": {}})
    return encode_event("BOOKMARK", msgspec.json.encode(obj))


class Streams:
    """The open watch responses, so a test can cut them."""

    def __init__(self) -> None:
        self.open: dict[int, web.BaseRequest] = {}

    def drop_all(self) -> int:
        count = 0
        for request in list(self.open.values()):
            if request.transport is not None:
                request.transport.abort()
                count += 1
        return count


async def serve(request: web.BaseRequest, store: Store, streams: Streams, res: Resource, api_version: str,
                wq: WatchQuery, bookmark_interval: float) -> web.StreamResponse:
    q, started = wq.q, time.monotonic()
    initial: list[JSON] = []
    expired: JSON | None = None
    start_rv = 0
    with store.lock:
        table = store.table(res.storage_key)
        send_initial = wq.send_initial if wq.send_initial is not None else wq.rv in ("", "0")
        if send_initial or wq.rv in ("", "0"):
            start_rv = store.rv
            if send_initial:
                initial = [o for k in table.keys_from("", q.prefix) if q.matches(res, o := table.objects[k])]
        else:
            start_rv = parse_rv(wq.rv)
            if table.too_old(start_rv):
                expired = resource_expired(f"too old resource version: {start_rv} ({table.floor})").status()
        watcher = table.subscribe(start_rv)
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                   "Cache-Control": "no-cache, private"})
    resp.enable_chunked_encoding()
    streams.open[id(request)] = request
    try:
        await resp.prepare(request)
        if expired is not None:
            await resp.write(encode_event("ERROR", msgspec.json.encode(expired)))
            await resp.write_eof()
            return resp
        for i in range(0, len(initial), BATCH):
            await resp.write(b"".join(encode_event("ADDED", encode_object(res, api_version, o))
                                      for o in initial[i:i + BATCH]))
        if wq.send_initial and wq.bookmarks:
            await resp.write(bookmark(res, api_version, start_rv, initial_end=True))
        deadline = started + wq.timeout
        next_bookmark = time.monotonic() + bookmark_interval
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            wait = deadline - now
            if wq.bookmarks:
                wait = min(wait, max(next_bookmark - now, 0))
            try:
                await asyncio.wait_for(watcher.wake.wait(), timeout=wait)
            except asyncio.TimeoutError:
                pass
            watcher.wake.clear()
            if watcher.closed:
                break
            with store.lock:
                try:
                    events = table.drain(watcher)
                except FellBehind:
                    break  # the cacher terminates watchers that cannot keep up
                current = store.rv
            out = []
            for ev in events:
                if ev.rv <= start_rv:
                    continue
                in_scope = not q.prefix or ev.key.startswith(q.prefix)
                cur = in_scope and ev.type != DELETED and q.matches(res, ev.obj)
                old = in_scope and ev.prev is not None and q.matches(res, ev.prev)
                if cur and not old:
                    out.append(encode_event("ADDED", encode_object(res, api_version, ev.obj)))
                elif cur and old:
                    out.append(encode_event(MODIFIED, encode_object(res, api_version, ev.obj)))
                elif old and ev.prev is not None:
                    gone = ev.obj if ev.type == DELETED else stamp(ev.prev, ev.rv)
                    out.append(encode_event(DELETED, encode_object(res, api_version, gone)))
            if out:
                await resp.write(b"".join(out))
            if wq.bookmarks and time.monotonic() >= next_bookmark:
                await resp.write(bookmark(res, api_version, current))
                next_bookmark = time.monotonic() + bookmark_interval
        await resp.write_eof()
    except (ConnectionError, RuntimeError):
        pass  # the client went away, or the connection was cut
    finally:
        streams.open.pop(id(request), None)
        store.unsubscribe(res.storage_key, watcher)
    return resp
