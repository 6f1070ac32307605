"""LIST: options validation, resourceVersion semantics, chunking and continue tokens.

  * ValidateListOptions (apimachinery/pkg/apis/meta/internalversion/validation): resourceVersionMatch
    needs resourceVersion, is forbidden with continue, is Exact or NotOlderThan, and Exact is
    forbidden for resourceVersion "0" -> 422 on ListOptions.meta.k8s.io.
  * the resourceVersion table of the API concepts doc (Resource Versions): unset -> most recent;
    "0" -> any; a value with limit and no match -> Exact; NotOlderThan waits briefly and answers
    504 "Timeout: Too large resource version: X, current: Y" (storage.NewTooLargeResourceVersionError,
    cause ResourceVersionTooLarge, Retry-After 1) when the store never gets there.
  * continue tokens are storage.EncodeContinue's: base64url(no padding) of
    {"v":"meta.k8s.io/v1","rv":R,"start":"<key after the list prefix>\\x00"}; "specifying resource
    version is not allowed when using continue" (400); an undecodable token is a 400.
  * paging follows etcd3 store.GetList: at most ``limit`` items, continue after the last key
    examined, ``remainingItemCount`` only when the selectors are empty; an expired (compacted)
    continue token is 410 Expired with the inconsistent-continue message and a fresh token whose
    rv is -1 (etcd3/errors.go handleCompactedErrorForPaging); an expired exact resourceVersion is
    410 "The resourceVersion for the provided list is too old.".
  * list items carry no kind/apiVersion: the versioning codec only sets them on the list.
"""
from __future__ import annotations

import asyncio
import base64
import posixpath
import time
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from .discovery import Resource, from_storage
from .errors import JSON, FieldError, bad_request, options_invalid, resource_expired, timeout
from .selectors import FieldReq, Requirement, fields_match, labels_match, parse_list_selectors
from .store import Store

INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")
EXPIRED_LIST = "The resourceVersion for the provided list is too old."
TOO_LARGE_WAIT = 3.0


@dataclass
class ListQuery:
    namespace: str | None
    labels: list[Requirement]
    fields: list[FieldReq]
    limit: int = 0
    cont: str = ""
    rv: str = ""
    rv_match: str = ""

    @property
    def prefix(self) -> str:
        return f"{self.namespace}/" if self.namespace else ""

    def matches(self, res: Resource, obj: JSON) -> bool:
        return ((not self.labels or labels_match(self.labels, obj["metadata"].get("labels")))
                and fields_match(res, self.fields, obj))


def parse_int(query: Mapping[str, str], name: str) -> int:
    raw = query.get(name, "")
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise bad_request(f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None


def parse_query(res: Resource, namespace: str | None, query: Mapping[str, str]) -> ListQuery:
    labels, fields = parse_list_selectors(res, query.get("labelSelector", ""), query.get("fieldSelector", ""))
    out = ListQuery(namespace, labels, fields, parse_int(query, "limit"), query.get("continue", ""),
                    query.get("resourceVersion", ""), query.get("resourceVersionMatch", ""))
    errs: list[FieldError] = []
    if out.rv_match:
        if not out.rv:
            errs.append(FieldError("FieldValueForbidden", "resourceVersionMatch",
                                   "resourceVersionMatch is forbidden unless resourceVersion is provided"))
        if out.cont:
            errs.append(FieldError("FieldValueForbidden", "resourceVersionMatch",
                                   "resourceVersionMatch is forbidden when continue is provided"))
        if out.rv_match not in ("Exact", "NotOlderThan"):
            errs.append(FieldError("FieldValueNotSupported", "resourceVersionMatch",
                                   'supported values: "Exact", "NotOlderThan", ""', out.rv_match))
        if out.rv_match == "Exact" and out.rv == "0":
            errs.append(FieldError("FieldValueForbidden", "resourceVersionMatch",
                                   'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
    if "sendInitialEvents" in query:
        errs.append(FieldError("FieldValueForbidden", "sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if errs:
        raise options_invalid("ListOptions", errs)
    if out.limit < 0:
        raise bad_request("list limit must not be negative")
    return out


def parse_rv(text: str) -> int:
    try:
        value = int(text)
        if value < 0:
            raise ValueError
        return value
    except ValueError:
        raise bad_request(f"invalid resource version: {text}") from None


def encode_continue(start_key: str, rv: int) -> str:
    raw = msgspec.json.encode({"v": "meta.k8s.io/v1", "rv": rv, "start": start_key})
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_continue(token: str) -> tuple[str, int]:
    """storage.DecodeContinue; the start key is relative to the list's key prefix."""
    try:
        data = msgspec.json.decode(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except (ValueError, msgspec.DecodeError) as exc:
        raise bad_request(f"invalid continue token: continue key is not valid: {exc}") from None
    if data.get("v") != "meta.k8s.io/v1":
        raise bad_request("invalid continue token: continue key is not valid: server does not recognize this "
                          f"encoded version {data.get('v')}")
    rv, start = data.get("rv"), data.get("start")
    if not isinstance(rv, int) or rv == 0:
        raise bad_request("invalid continue token: continue key is not valid: incorrect encoded start "
                          "resourceVersion (version meta.k8s.io/v1)")
    if not isinstance(start, str) or not start:
        raise bad_request("invalid continue token: continue key is not valid: encoded start key empty "
                          "(version meta.k8s.io/v1)")
    key = start if start.startswith("/") else "/" + start
    if posixpath.normpath(key) != key:
        raise bad_request(f"invalid continue token: continue key is not valid: {start}")
    return start, rv


async def wait_for_rv(store: Store, wanted: int) -> None:
    deadline = time.monotonic() + TOO_LARGE_WAIT
    while store.rv < wanted:
        if time.monotonic() >= deadline:
            raise timeout(f"Too large resource version: {wanted}, current: {store.rv}", 1,
                          [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}])
        await asyncio.sleep(0.05)


async def list_objects(store: Store, res: Resource, api_version: str, q: ListQuery, page_cap: int = 0) -> bytes:
    """The encoded list response (items without kind/apiVersion)."""
    at: int | None = None  # None: the current state
    start = ""
    if q.cont:
        start, token_rv = decode_continue(q.cont)
        if q.rv not in ("", "0"):
            raise bad_request("specifying resource version is not allowed when using continue")
        at = None if token_rv < 0 else token_rv
    elif q.rv not in ("", "0"):
        wanted = parse_rv(q.rv)
        if wanted > store.rv:
            await wait_for_rv(store, wanted)
        if q.rv_match == "Exact" or (q.limit and not q.rv_match):
            at = wanted
    limit = q.limit
    if page_cap:
        limit = min(limit, page_cap) if limit else page_cap
    with store.lock:
        table = store.table(res.storage_key)
        list_rv = store.rv if at is None else at
        if at is not None and table.too_old(at):
            if q.cont:
                raise resource_expired(INCONSISTENT_CONTINUE, encode_continue(start, -1))
            raise resource_expired(EXPIRED_LIST)
        over = table.state_at(at) if at is not None else {}
        items, last, more = _page(table, res, q, q.prefix + start, limit, over)
        meta: JSON = {"resourceVersion": str(list_rv)}
        if more and last is not None:
            meta["continue"] = encode_continue(last[len(q.prefix):] + "\x00", list_rv)
            if not q.labels and not q.fields:
                meta["remainingItemCount"] = _count_from(table, q.prefix, last + "\x00", over)
        if res.storage[1]:  # another version's view of the storage: convert, no cache
            encoded = [msgspec.json.encode(from_storage(res, o)) for _, o in items]
        else:
            encoded = [table.encoded(key, obj) for key, obj in items]
    head = msgspec.json.encode({"kind": res.list_kind or f"{res.kind}List", "apiVersion": api_version,
                                "metadata": meta})
    return head[:-1] + b',"items":[' + b",".join(encoded) + b"]}"


def _page(table: Any, res: Resource, q: ListQuery, start: str, limit: int,
          over: dict[str, JSON | None]) -> tuple[list[tuple[str, JSON]], str | None, bool]:
    items: list[tuple[str, JSON]] = []
    last: str | None = None
    objects = table.objects
    for key in table.keys_from(start, q.prefix, list(over) if over else None):
        if limit and len(items) >= limit:
            return items, last, True
        last = key
        obj = over[key] if key in over else objects.get(key)
        if obj is not None and q.matches(res, obj):
            items.append((key, obj))
    return items, last, False


def _count_from(table: Any, prefix: str, start: str, over: dict[str, JSON | None]) -> int:
    """How many keys of the snapshot are >= start within the prefix (etcd's Count for the range)."""
    keys = table.sorted_keys()
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else None
    hi = bisect_left(keys, end) if end else len(keys)
    count = max(hi - bisect_left(keys, max(start, prefix)), 0)
    for key, then in over.items():
        if key < start or not key.startswith(prefix):
            continue
        now = key in table.objects
        if now and then is None:
            count -= 1
        elif not now and then is not None:
            count += 1
    return count

