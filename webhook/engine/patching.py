"""RFC 6902 JSON patches between an original object and its mutated copy.

The patch is what the API server applies, so it must give exactly the mutated object:
``jsonpatch.apply_patch(original, diff(original, mutated)) == mutated``. Operations are
kept small: a new key is one ``add`` of its whole value (so a missing parent is created,
never assumed), changed scalars are ``replace``, lists that only grew get ``add`` per new
element, other list changes replace the list. Unchanged subtrees shared between the two
objects cost nothing (identity short-circuit).
"""
from __future__ import annotations

import base64
import json
from typing import Any

from webhook.kube.pointers import escape

Operation = dict[str, Any]
_MISSING = object()


def diff(original: Any, mutated: Any) -> list[Operation]:
    """The operations that turn ``original`` into ``mutated``."""
    ops: list[Operation] = []
    _diff(original, mutated, "", ops)
    return ops


def decode(data: str) -> list[Operation]:
    """The patch of an AdmissionReview answer (base64 of its JSON), for tests and tools."""
    patch: Any = json.loads(base64.b64decode(data))
    if not isinstance(patch, list):
        raise ValueError("a JSON patch is a JSON array")
    return patch


def same(a: Any, b: Any) -> bool:
    """JSON equality: like ``==`` but ``True`` is not ``1`` and ``1`` is not ``1.0``.

    Python's ``==`` treats those as equal, yet they serialise differently, so a patch that
    skipped them would not reproduce the mutated object byte for byte.
    """
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    # Plain loops rather than all(<generator>) and key sets: a settling admission compares two
    # passes' patches with this, and the generators cost more than the comparisons.
    if isinstance(a, dict):
        if len(a) != len(b):
            return False
        for key, value in a.items():
            # Same size, so every key of a found in b means the same keys. A key that b
            # lacks meets _MISSING, which is the same as no JSON value.
            if not same(value, b.get(key, _MISSING)):
                return False
        return True
    if isinstance(a, list):
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if not same(x, y):
                return False
        return True
    return bool(a == b)


def _diff(a: Any, b: Any, path: str, ops: list[Operation]) -> None:
    if a is b:
        return
    if type(a) is dict and type(b) is dict:
        _diff_dict(a, b, path, ops)
    elif type(a) is list and type(b) is list:
        _diff_list(a, b, path, ops)
    elif not same(a, b):
        ops.append({"op": "replace", "path": path, "value": b})


def _diff_dict(a: dict[str, Any], b: dict[str, Any], path: str, ops: list[Operation]) -> None:
    first, added = len(ops), 0  # where this dict's operations start; keys of b new in a
    for key in b:  # with value = b[key], measurably cheaper than unpacking b.items() pairs
        value = b[key]
        old = a.get(key, _MISSING)
        if old is value:  # shared with the original: nothing to build, not even the path
            continue
        # Escaping is for the rare key with '~' or '/': a call per key costs more than the check.
        child = f"{path}/{escape(key)}" if "~" in key or "/" in key else f"{path}/{key}"
        if old is _MISSING:
            added += 1
            ops.append({"op": "add", "path": child, "value": value})
        elif type(old) is dict and type(value) is dict:  # most changed values: skip the dispatch
            _diff_dict(old, value, child, ops)
        else:
            _diff(old, value, child, ops)
    # Every key of b that was not added is a key of a, so a has keys that b lacks exactly when
    # it has more keys than those; counting is cheaper than comparing key sets. The engine
    # rarely removes a key, so removals are found last, but they go first.
    if len(a) > len(b) - added:
        ops[first:first] = [{"op": "remove", "path": f"{path}/{escape(key)}"} for key in a if key not in b]


def _diff_list(a: list[Any], b: list[Any], path: str, ops: list[Operation]) -> None:
    if len(b) < len(a):
        # Removing by index shifts every later element; one replace is clearer and safe.
        ops.append({"op": "replace", "path": path, "value": b})
        return
    for i, x in enumerate(a):  # indexing b is cheaper than zipping pairs for these short lists
        if x is not b[i]:  # shared with the original: nothing to build, not even the path
            _diff(x, b[i], f"{path}/{i}", ops)
    for i in range(len(a), len(b)):
        ops.append({"op": "add", "path": f"{path}/{i}", "value": b[i]})
