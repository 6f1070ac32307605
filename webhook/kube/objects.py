"""Small facts about Kubernetes objects as plain data: metadata, ``List`` objects, names."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["copy_json", "describe", "flatten", "is_list", "meta"]


def meta(obj: Mapping[str, Any] | None, key: str) -> Any:
    """``metadata.<key>`` of an object, or None."""
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    return metadata.get(key) if isinstance(metadata, Mapping) else None


def copy_json(value: Any) -> Any:
    """A deep copy of plain JSON data (dicts, lists and scalars), much cheaper than
    ``copy.deepcopy``: fragments shared between objects are copied before going into one."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def is_list(obj: Mapping[str, Any]) -> bool:
    """A ``v1 List`` or a typed list (``NodeList``, ...), as ``kubectl get -o yaml`` prints them."""
    return str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list)


def flatten(objects: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    """The objects, with every List unpacked (recursively); anything not a mapping is skipped."""
    for obj in objects:
        if not isinstance(obj, Mapping):
            continue
        if is_list(obj):
            yield from flatten(obj["items"])
        else:
            yield obj


def describe(obj: Mapping[str, Any], *, kind: str = "", namespace: str | None = None, name: str | None = None) -> str:
    """``Kind/namespace/name`` (``Kind/name`` without a namespace) for messages; the keyword
    arguments stand in for what the object does not say (an AdmissionReview's request)."""
    generate = meta(obj, "generateName")
    shown_name = meta(obj, "name") or (f"{generate}*" if generate else None) or name or "(unnamed)"
    shown_kind = obj.get("kind") or kind or "(no kind)"
    ns = namespace or meta(obj, "namespace")
    return f"{shown_kind}/{ns}/{shown_name}" if ns else f"{shown_kind}/{shown_name}"
