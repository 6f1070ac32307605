"""JSON pointers (RFC 6901) and key paths into plain JSON data.

A path is a tuple of keys (and list indexes); a pointer is its string form, ``/spec/template``,
with ``~`` written ``~0`` and ``/`` written ``~1`` inside a key.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["Path", "escape", "get_path", "pointer", "resolve", "to_path"]

Path = tuple[str, ...]


def escape(key: str) -> str:
    """One reference token: ``~`` -> ``~0``, then ``/`` -> ``~1`` (RFC 6901, section 3)."""
    if "~" in key or "/" in key:
        return key.replace("~", "~0").replace("/", "~1")
    return key


def pointer(path: Iterable[str | int]) -> str:
    """The pointer of a path of keys and list indexes (``()`` is the whole document)."""
    return "".join("/" + escape(str(p)) for p in path)


def to_path(text: str) -> Path:
    """The keys of a pointer, unescaped (``~1`` -> ``/`` first, then ``~0`` -> ``~``)."""
    if text in ("", "/"):
        return ()
    if not text.startswith("/"):
        raise ValueError(f"JSON pointer must start with '/': {text!r}")
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/"))


def get_path(obj: Any, path: Iterable[str]) -> Any:
    """The value at ``path`` in nested mappings, or None when a step is missing or not a mapping."""
    cur = obj
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
        if cur is None:
            return None
    return cur


def resolve(obj: Any, text: str) -> tuple[bool, Any]:
    """``(found, value)`` at a pointer, stepping into lists by index."""
    node = obj
    for token in to_path(text):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False, None
    return True, node
