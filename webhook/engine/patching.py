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
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
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
    if not a.keys() <= b.keys():  # the engine rarely removes a key
        for key in a:
            if key not in b:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
    for key, value in b.items():
        old = a.get(key, _MISSING)
        if old is value:  # shared with the original: nothing to build, not even the path
            continue
        if old is _MISSING:
            ops.append({"op": "add", "path": f"{path}/{escape(key)}", "value": value})
        else:
            _diff(old, value, f"{path}/{escape(key)}", ops)


def _diff_list(a: list[Any], b: list[Any], path: str, ops: list[Operation]) -> None:
    if len(b) < len(a):
        # Removing by index shifts every later element; one replace is clearer and safe.
        ops.append({"op": "replace", "path": path, "value": b})
        return
    for i, (x, y) in enumerate(zip(a, b)):
        if x is not y:  # shared with the original: nothing to build, not even the path
            _diff(x, y, f"{path}/{i}", ops)
    for i in range(len(a), len(b)):
        ops.append({"op": "add", "path": f"{path}/{i}", "value": b[i]})
