"""``shapes.check`` compiles its shape tables once, at import, so that a check asks no shape what
it is. It must still answer exactly as the direct walk over the tables did: the same verdict and
the same message, byte for byte, on any object of mixed JSON types. The direct walk is kept here,
as it was, as the reference.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.engine import shapes
from webhook.engine.context import PlacementError
from webhook.kube.kinds import BUILTIN, Target
from webhook.kube.pointers import get_path

# ---------------------------------------------------------------- the reference: the direct walk


def reference_check(obj: dict[str, Any], target: Target) -> None:
    found = reference_problem(obj.get("metadata"), {"labels": {}, "annotations": {}}, "metadata")
    for path, shape in ((target.pod_labels, {}), (target.selector, shapes.LABEL_SELECTOR), (target.pod_spec, shapes.POD_SPEC)):
        found = found or (reference_problem(get_path(obj, path), shape, _dotted(path)) if path else None)
    if found:
        raise PlacementError(found)


def _said(where: str, what: str) -> str:
    leaf = where.rsplit(".", 1)[-1]
    return f"{leaf} is {what} (at {where})"


def reference_problem(value: Any, shape: shapes.Shape, where: str) -> str | None:
    found = _misshapen(value, shape)
    if found is None:
        return None
    steps, what = found
    return _said(where + "".join(reversed(steps)), what)


def _misshapen(value: Any, shape: shapes.Shape) -> tuple[list[str], str] | None:
    if value is None or shape is None:
        return None
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return [], "not a mapping"
        for key, inner in shape.items():
            found = _misshapen(value.get(key), inner)
            if found is not None:
                found[0].append(f".{key}")
                return found
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return [], "not a list"
        element = shape[0]
        if element is None:
            return None
        for i, item in enumerate(value):
            found = ([], "null") if item is None else _misshapen(item, element)
            if found is not None:
                found[0].append(f"[{i}]")
                return found
        return None
    if isinstance(value, shape):
        return None
    return [], "not a string" if shape is str else f"not a {shape.__name__}"


def _dotted(path: Sequence[str]) -> str:
    return ".".join(path)


# ---------------------------------------------------------------- generated objects

KEYS = st.sampled_from(["key", "operator", "values", "matchLabels", "matchExpressions", "x", ""])
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3)
ANY_JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
                        max_leaves=6)


def shaped(shape: shapes.Shape) -> st.SearchStrategy[Any]:
    """Mostly values of ``shape`` (with extra fields); one in ten is anything, null included,
    so that most objects go deep before a field of another type stops the check."""
    conforming = _of_shape(shape)
    return st.integers(1, 10).flatmap(lambda n: ANY_JSON if n == 1 else conforming)


def _of_shape(shape: shapes.Shape) -> st.SearchStrategy[Any]:
    if shape is None:
        return ANY_JSON
    if isinstance(shape, dict):
        fields = {key: shaped(inner) for key, inner in shape.items()}
        extra = st.dictionaries(KEYS, ANY_JSON, max_size=2)
        return st.builds(lambda named, more: {**more, **named}, st.fixed_dictionaries(fields), extra)
    if isinstance(shape, list):
        return st.lists(shaped(shape[0]), max_size=2)
    return st.text(max_size=3)


def object_shape(target: Target) -> dict[str, Any]:
    """The shape of a whole object of ``target``: each field the check reads, at its path."""
    shape: dict[str, Any] = {"metadata": {"labels": {}, "annotations": {}}}
    for path, inner in ((target.pod_labels, {}), (target.selector, shapes.LABEL_SELECTOR), (target.pod_spec, shapes.POD_SPEC)):
        if not path:
            continue
        here = shape
        for key in path[:-1]:
            here = here.setdefault(key, {})
        here.setdefault(path[-1], inner)
    return shape


TARGETS = list(BUILTIN)  # among them kinds with no selector, and one with no pod spec


@st.composite
def target_and_object(draw: st.DrawFn) -> tuple[Target, dict[str, Any]]:
    target = draw(st.sampled_from(TARGETS))
    return target, draw(_of_shape(object_shape(target)))


def verdict(check: Any, obj: dict[str, Any], target: Target) -> str | None:
    try:
        check(obj, target)
    except PlacementError as exc:
        return str(exc)
    return None


# ---------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(target_and_object())
def test_the_compiled_check_answers_as_the_direct_walk_did(case: tuple[Target, dict[str, Any]]) -> None:
    target, obj = case
    assert verdict(shapes.check, obj, target) == verdict(reference_check, obj, target)


@pytest.mark.parametrize(("field", "value", "message"), [
    (("spec", "template", "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
      "nodeSelectorTerms"), [{"matchExpressions": [{"key": "zone", "values": "a"}]}],
     "values is not a list (at spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
     ".nodeSelectorTerms[0].matchExpressions[0].values)"),
    (("spec", "template", "spec", "tolerations"), [{}, None], "tolerations[1] is null (at spec.template.spec.tolerations[1])"),
    (("spec", "selector"), {"matchExpressions": [{"key": 7}]}, "key is not a string (at spec.selector.matchExpressions[0].key)"),
    (("metadata", "labels"), [], "labels is not a mapping (at metadata.labels)"),
])
def test_the_message_names_the_first_wrong_field_by_its_path(field: tuple[str, ...], value: Any, message: str) -> None:
    obj: dict[str, Any] = {}
    here = obj
    for key in field[:-1]:
        here = here.setdefault(key, {})
    here[field[-1]] = value
    deployment = BUILTIN.lookup("apps", "Deployment")
    assert deployment is not None
    assert verdict(shapes.check, obj, deployment) == message == verdict(reference_check, obj, deployment)
