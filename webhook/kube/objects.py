"""Small facts about Kubernetes objects as plain data: metadata, ``List`` objects, names."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

__all__ = ["by_kind", "controller_of", "copy_json", "describe", "flatten", "is_list", "kind_of", "meta"]

T = TypeVar("T")


def meta(obj: Mapping[str, Any] | None, key: str) -> Any:
    """``metadata.<key>`` of an object, or None."""
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    return metadata.get(key) if isinstance(metadata, Mapping) else None


def controller_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The ownerReference that names the object's managing controller, or None.

    As ``metav1.GetControllerOfNoCopy`` (apimachinery/pkg/apis/meta/v1/controller_ref.go): the
    first entry whose ``controller`` is true. The API server lets at most one entry say so
    (``ValidateOwnerReferences``); entries that are not mappings are passed over.
    """
    refs = meta(obj, "ownerReferences")
    if not isinstance(refs, list):
        return None
    return next((ref for ref in refs if isinstance(ref, Mapping) and ref.get("controller") is True), None)


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


def kind_of(obj: Mapping[str, Any]) -> str:
    """An object's ``kind``, "" when it has none."""
    return str(obj.get("kind") or "")


def by_kind(items: Iterable[T], *, kind: Callable[[Any], str] = kind_of) -> dict[str, list[T]]:
    """``items`` (the objects of a dump, or anything ``kind`` reads a kind from) grouped by
    kind: Nodes first, since every other object is read against them (a Pod only with its
    node), then each kind in the order it first appears; a kind's items in the order given."""
    groups: dict[str, list[T]] = {"Node": []}
    for item in items:
        groups.setdefault(kind(item), []).append(item)
    if not groups["Node"]:
        del groups["Node"]
    return groups


def describe(obj: Mapping[str, Any], *, kind: str = "", namespace: str | None = None, name: str | None = None) -> str:
    """``Kind/namespace/name`` (``Kind/name`` without a namespace) for messages; the keyword
    arguments stand in for what the object does not say (an AdmissionReview's request)."""
    generate = meta(obj, "generateName")
    shown_name = meta(obj, "name") or (f"{generate}*" if generate else None) or name or "(unnamed)"
    shown_kind = obj.get("kind") or kind or "(no kind)"
    ns = namespace or meta(obj, "namespace")
    return f"{shown_kind}/{ns}/{shown_name}" if ns else f"{shown_kind}/{shown_name}"
