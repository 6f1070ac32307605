"""metadata.managedFields for Update operations (create, update, patch), as the field manager
records them (staging/src/k8s.io/apimachinery/pkg/util/managedfields, handlers/create.go
``managerOrUserAgent``): one entry per (manager, operation, apiVersion, subresource) with the
time, ``fieldsType: FieldsV1`` and the fields that manager set. Fields an update changes move to
its manager and are taken from the others; an entry whose set becomes empty is dropped.

Approximation: lists are owned as a whole (like ``+listType=atomic``), so list items are not keyed
with ``k:{...}``/``v:...`` path elements as the structured-merge-diff type schema would.
"""
from __future__ import annotations

import unicodedata
from datetime import datetime, timezone
from typing import Any

from .errors import JSON, FieldError

# the fields the StripMeta manager never tracks
_IGNORED = {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"),
            ("metadata", "creationTimestamp"), ("metadata", "selfLink"), ("metadata", "uid"),
            ("metadata", "generation"), ("metadata", "managedFields"), ("metadata", "resourceVersion"),
            ("metadata", "deletionTimestamp"), ("metadata", "deletionGracePeriodSeconds")}
Path = tuple[str, ...]


def manager_or_user_agent(manager: str, user_agent: str) -> str:
    """handlers/create.go managerOrUserAgent / prefixFromUserAgent."""
    if manager:
        return manager
    out = ""
    for ch in user_agent.split("/")[0]:
        if not ch.isprintable():
            continue
        if len((out + ch).encode()) > 128:
            break
        out += ch
    return out


def validate_manager(manager: str) -> list[FieldError]:
    """metav1 validation ValidateFieldManager."""
    if len(manager.encode()) > 128:
        return [FieldError("FieldValueTooLong", "fieldManager", "may not be more than 128 bytes")]
    for ch in manager:
        if not ch.isprintable() or unicodedata.category(ch).startswith("C"):
            return [FieldError("FieldValueInvalid", "fieldManager", "must only contain printable characters",
                               manager)]
    return []


def leaves(obj: Any, prefix: Path = ()) -> dict[Path, Any]:
    out: dict[Path, Any] = {}
    if isinstance(obj, dict) and (obj or not prefix):
        for key, value in obj.items():
            path = prefix + (key,)
            if path in _IGNORED:
                continue
            out.update(leaves(value, path))
    elif prefix:
        out[prefix] = obj
    return out


def _to_fields(paths: set[Path]) -> JSON:
    root: JSON = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return root


def _from_fields(fields: JSON, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, sub in fields.items():
        if not key.startswith("f:"):
            continue
        path = prefix + (key[2:],)
        if isinstance(sub, dict) and sub:
            out |= _from_fields(sub, path)
        else:
            out.add(path)
    return out


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def update(old: JSON | None, new: JSON, manager: str, api_version: str, subresource: str = "") -> None:
    """Record an Update by ``manager`` turning ``old`` (None on create) into ``new``, in place."""
    before = leaves(old) if old is not None else {}
    after = leaves(new)
    changed = {p for p, v in after.items() if p not in before or before[p] != v}
    removed = set(before) - set(after)
    entries: list[JSON] = list(((old or {}).get("metadata") or {}).get("managedFields") or [])
    out: list[JSON] = []
    mine: JSON | None = None
    for entry in entries:
        owned = _from_fields(entry.get("fieldsV1") or {})
        is_mine = (entry.get("manager") == manager and entry.get("operation") == "Update"
                   and entry.get("apiVersion") == api_version and entry.get("subresource", "") == subresource)
        if is_mine:
            mine = entry
            continue
        kept = {p for p in owned if not any(p[:len(c)] == c or c[:len(p)] == p for c in changed | removed)}
        if kept != owned:
            entry = {**entry, "fieldsV1": _to_fields(kept)}
        if kept:
            out.append(entry)
    owned_mine = _from_fields(mine.get("fieldsV1") or {}) if mine else set()
    owned_mine = {p for p in owned_mine if p in after} | changed
    if owned_mine:
        fields = _to_fields(owned_mine)
        if mine is not None and mine.get("fieldsV1") == fields:
            entry = mine
        else:
            entry = {"manager": manager, "operation": "Update", "apiVersion": api_version, "time": now_rfc3339(),
                     "fieldsType": "FieldsV1", "fieldsV1": fields}
            if subresource:
                entry["subresource"] = subresource
        out.append(entry)
    meta = new.setdefault("metadata", {})
    if out:
        meta["managedFields"] = out
    else:
        meta.pop("managedFields", None)
