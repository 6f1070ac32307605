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
