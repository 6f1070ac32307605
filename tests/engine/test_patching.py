"""RFC 6902 patches between an original object and its mutated copy."""
from __future__ import annotations

import base64
import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook import codec
from webhook.engine import patching
from webhook.kube.pointers import escape


def test_identical_objects_give_an_empty_patch() -> None:
    obj = {"a": {"b": [1, 2, {"c": None}]}}
    assert patching.diff(obj, copy.deepcopy(obj)) == []
    assert patching.diff(obj, obj) == []


def test_a_new_key_under_a_missing_parent_adds_the_whole_parent() -> None:
    original = {"metadata": {"name": "web"}}
    mutated = {"metadata": {"name": "web", "annotations": {"placement.novasphere.dev/applied": "spread"}}}
    assert patching.diff(original, mutated) == [
        {"op": "add", "path": "/metadata/annotations", "value": {"placement.novasphere.dev/applied": "spread"}}
    ]


def test_a_new_annotation_key_with_a_slash_is_escaped() -> None:
    original = {"metadata": {"annotations": {"team": "a"}}}
    mutated = {"metadata": {"annotations": {"team": "a", "placement.novasphere.dev/applied": "x"}}}
    assert patching.diff(original, mutated) == [
        {"op": "add", "path": "/metadata/annotations/placement.novasphere.dev~1applied", "value": "x"}
    ]


@pytest.mark.parametrize(
    ("original", "mutated", "ops"),
    [
        ({"a": 1}, {"a": 2}, [{"op": "replace", "path": "/a", "value": 2}]),
        ({"a": 1, "b": 2}, {"a": 1}, [{"op": "remove", "path": "/b"}]),
        ({"a": 1}, {"a": True}, [{"op": "replace", "path": "/a", "value": True}]),
        ({"a": 1}, {"a": 1.0}, [{"op": "replace", "path": "/a", "value": 1.0}]),
        ({"a": {"x": 1}}, {"a": [1]}, [{"op": "replace", "path": "/a", "value": [1]}]),
        ({"a": None}, {"a": {"b": 1}}, [{"op": "replace", "path": "/a", "value": {"b": 1}}]),
        ({"l": [1, 2]}, {"l": [1, 2, 3, 4]}, [{"op": "add", "path": "/l/2", "value": 3}, {"op": "add", "path": "/l/3", "value": 4}]),
        ({"l": [1, 2, 3]}, {"l": [1, 3]}, [{"op": "replace", "path": "/l", "value": [1, 3]}]),
        ({"l": [{"k": 1}]}, {"l": [{"k": 1, "v": 2}]}, [{"op": "add", "path": "/l/0/v", "value": 2}]),
        ({"l": [1, 2]}, {"l": [9, 2]}, [{"op": "replace", "path": "/l/0", "value": 9}]),
        ([1], {"a": 1}, [{"op": "replace", "path": "", "value": {"a": 1}}]),
    ],
)
def test_operations_are_small_and_exact(original: Any, mutated: Any, ops: list[dict[str, Any]]) -> None:
    assert patching.diff(original, mutated) == ops
    assert jsonpatch.apply_patch(original, ops) == mutated


def test_terms_anded_in_place_patch_only_the_grown_expression_lists() -> None:
    terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    original = {"spec": {"affinity": {"nodeAffinity": {"terms": terms}}}}
    mutated = copy.deepcopy(original)
    extra = {"key": "maintenance", "operator": "NotIn", "values": ["true"]}
    mutated["spec"]["affinity"]["nodeAffinity"]["terms"][0]["matchExpressions"].append(extra)
    assert patching.diff(original, mutated) == [
        {"op": "add", "path": "/spec/affinity/nodeAffinity/terms/0/matchExpressions/1", "value": extra}
    ]


def test_same_is_json_equality_not_python_equality() -> None:
    assert patching.same({"a": [1, {"b": "c"}]}, {"a": [1, {"b": "c"}]})
    assert not patching.same(True, 1)
    assert not patching.same([0], [False])
    assert not patching.same({"a": 1}, {"b": 1})


def test_decode_reads_the_base64_json_an_answer_carries() -> None:
    patch = [{"op": "add", "path": "/a~1b", "value": {"x": [1]}}]
    assert patching.decode(base64.b64encode(codec.dumps(patch)).decode()) == patch


def test_decode_rejects_anything_but_a_list() -> None:
    with pytest.raises(ValueError, match="JSON array"):
        patching.decode(base64.b64encode(b'{"op": "add"}').decode())


_keys = st.sampled_from(["a", "b", "a/b", "~", "~1", "metadata", "x.y/z"])
_scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, width=16) | st.text(max_size=3)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(original=_json, mutated=_json)
def test_applying_the_patch_to_the_original_gives_the_mutated_value(original: Any, mutated: Any) -> None:
    ops = patching.diff(original, mutated)
    result = jsonpatch.apply_patch(copy.deepcopy(original), ops)
    assert patching.same(result, mutated)
    assert patching.diff(mutated, copy.deepcopy(mutated)) == []


# The differ as it was before it was tuned for speed, kept as the reference the tuned one must
# match operation for operation: same order, same paths, the very same value objects.
_REFERENCE_MISSING = object()


def _reference_same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_reference_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_reference_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _reference_diff(original: Any, mutated: Any) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    _reference_walk(original, mutated, "", ops)
    return ops


def _reference_walk(a: Any, b: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if a is b:
        return
    if type(a) is dict and type(b) is dict:
        if not a.keys() <= b.keys():
            for key in a:
                if key not in b:
                    ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in b.items():
            old = a.get(key, _REFERENCE_MISSING)
            if old is value:
                continue
            if old is _REFERENCE_MISSING:
                ops.append({"op": "add", "path": f"{path}/{escape(key)}", "value": value})
            else:
                _reference_walk(old, value, f"{path}/{escape(key)}", ops)
    elif type(a) is list and type(b) is list:
        if len(b) < len(a):
            ops.append({"op": "replace", "path": path, "value": b})
            return
        for i, (x, y) in enumerate(zip(a, b)):
            if x is not y:
                _reference_walk(x, y, f"{path}/{i}", ops)
        for i in range(len(a), len(b)):
            ops.append({"op": "add", "path": f"{path}/{i}", "value": b[i]})
    elif not _reference_same(a, b):
        ops.append({"op": "replace", "path": path, "value": b})


def _edited(draw: st.DrawFn, value: Any) -> Any:
    """``value`` as admission's working copy leaves it: what no edit touched is the very same
    object; an edited dict or list is a copy whose untouched children are still shared."""
    how = draw(st.sampled_from(["share", "share", "descend", "descend", "replace", "equal copy", "retyped"]))
    if how == "share":
        return value
    if how == "replace":
        return draw(_json)
    if how == "retyped":  # == in Python, yet another JSON value: True for 1, 1.0 for 1
        return _retyped(value)
    if how == "equal copy":  # equal, but not the same object: the differ must look inside
        return copy.deepcopy(value)
    return _edited_inside(draw, value)


def _edited_inside(draw: st.DrawFn, value: Any) -> Any:
    if isinstance(value, dict):
        return _edited_dict(draw, value)
    if isinstance(value, list):
        return _edited_list(draw, value)
    return _edited(draw, value)


def _retyped(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _edited_dict(draw: st.DrawFn, value: dict[str, Any]) -> dict[str, Any]:
    keys = list(value)
    if draw(st.integers(0, 4)) == 0:  # rebuilt in another key order
        keys = draw(st.permutations(keys))
    removed = draw(st.sets(st.sampled_from(keys))) if keys and draw(st.booleans()) else set()
    edited = {key: _edited(draw, value[key]) for key in keys if key not in removed}
    for key in draw(st.lists(_keys, max_size=2)):  # may bring back a removed key, changed
        edited.setdefault(key, draw(_json))
    return edited


def _edited_list(draw: st.DrawFn, value: list[Any]) -> list[Any]:
    edited = [_edited(draw, x) for x in value]
    if draw(st.booleans()):
        return edited[: draw(st.integers(0, len(edited)))]
    return edited + draw(st.lists(_json, max_size=3))


@st.composite
def _original_and_edited(draw: st.DrawFn) -> tuple[Any, Any]:
    """Mostly an object, as admission's are, whose working copy is always a copy of the root."""
    original = draw(st.dictionaries(_keys, _json, max_size=5) | _json)
    return original, _edited_inside(draw, original)


def _typed(value: Any) -> Any:
    """``value`` with the JSON type of every node spelt out, so ``==`` tells True from 1 and 1 from 1.0."""
    if isinstance(value, dict):
        return {key: _typed(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_typed(x) for x in value]
    return (type(value).__name__, value)


def _values(ops: list[dict[str, Any]]) -> list[Any]:
    return [op.get("value", _REFERENCE_MISSING) for op in ops]


@settings(max_examples=500, deadline=None)
@given(pair=_original_and_edited())
def test_diff_gives_exactly_the_operations_the_reference_differ_gave(pair: tuple[Any, Any]) -> None:
    original, mutated = pair
    ops, expected = patching.diff(original, mutated), _reference_diff(original, mutated)
    assert [(op["op"], op["path"]) for op in ops] == [(op["op"], op["path"]) for op in expected]
    assert all(mine is theirs for mine, theirs in zip(_values(ops), _values(expected)))
    assert _typed(jsonpatch.apply_patch(copy.deepcopy(original), ops)) == _typed(mutated)


@settings(max_examples=300, deadline=None)
@given(pair=_original_and_edited())
def test_same_answers_as_the_reference_does(pair: tuple[Any, Any]) -> None:
    original, mutated = pair
    assert patching.same(original, mutated) == _reference_same(original, mutated)
    assert patching.same(mutated, copy.deepcopy(mutated))
