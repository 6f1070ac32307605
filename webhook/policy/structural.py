"""Pydantic's JSON Schema of the policy model, turned into a Kubernetes *structural* schema.

A CustomResourceDefinition of ``apiextensions.k8s.io/v1`` only takes structural schemas
(k8s.io/apiextensions-apiserver/pkg/apiserver/schema: ``NewStructural``, ``ValidateStructural``):
every value has a ``type`` (or is int-or-string, or preserves unknown fields), there is no
``$ref``, and a logical junctor (``anyOf``...) carries no type, description, default or
``nullable``. The keywords are OpenAPI v3's of the ``JSONSchemaProps`` type, where JSON Schema
2020-12's differ (``exclusiveMinimum`` is a flag there, ``const`` does not exist).

What the API server cannot check (a Python-only pattern, label-key rules on map keys, which of
several shapes a value takes) is left out here: the loader still checks it, when ``lint`` runs
and when the webhook loads the policy.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["UnsupportedSchema", "convert", "re2_compatible"]

# JSONSchemaProps fields (k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1) copied as
# they are; everything else is translated below or refused, so a new construct in the model
# fails the generator instead of producing a CRD the API server rejects.
_COPIED = frozenset({
    "type", "format", "enum", "required", "minimum", "maximum", "minLength", "maxLength",
    "minItems", "maxItems", "minProperties", "maxProperties", "multipleOf",
})
# Pydantic noise, and ``propertyNames``, which JSONSchemaProps lacks: the keys of a
# nodeSelector or annotations map are label keys, checked by the loader.
_DROPPED = frozenset({"title", "propertyNames", "$schema", "$id"})
_JUNCTORS = ("anyOf", "oneOf")
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]

# Go's regexp (RE2) lacks these Python constructs: an escape after a backslash ...
_PYTHON_ONLY_ESCAPES = frozenset("123456789ZuUNg")
# ... and a group opening other than (?:...), (?P<name>...) or inline flags Go knows.
_GO_GROUP = re.compile(r"\?(:|P<|[imsU-]+[:)])")


class UnsupportedSchema(ValueError):
    """A JSON Schema construct with no structural equivalent; the message names its path."""


def convert(node: Mapping[str, Any], defs: Mapping[str, Any], *, at: str = "") -> dict[str, Any]:
    """The structural form of ``node``, its ``$ref`` s resolved against ``defs``."""
    node = _resolved(_optional_unwrapped(_resolved(node, defs)), defs)
    if any(j in node for j in _JUNCTORS):
        return _union(node, defs, at=at)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description":
            out[key] = _description(value)
        elif key == "properties":
            out[key] = {name: convert(sub, defs, at=f"{at}.{name}") for name, sub in value.items()}
        elif key == "items":
            out[key] = convert(value, defs, at=f"{at}[]")
        elif key == "additionalProperties":
            _additional(out, value, defs, at=at)
        else:
            _scalar_keyword(out, key, value, at=at)
    if "type" not in out:
        raise UnsupportedSchema(f"{at or '(root)'}: no type: {dict(node)}")
    return _ordered(out)


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    """``type`` and ``description`` first, as people read a schema."""
    first: dict[str, Any] = {k: node[k] for k in ("type", "description") if k in node}
    return {**first, **{k: v for k, v in node.items() if k not in first}}


def _additional(out: dict[str, Any], value: Any, defs: Mapping[str, Any], *, at: str) -> None:
    """A schema is a map's value type; ``true`` keeps any fields, which structural schemas say
    with ``x-kubernetes-preserve-unknown-fields``; ``false`` (unknown fields forbidden) is what
    they do anyway: the API server prunes a field it has no schema for."""
    if isinstance(value, Mapping):
        out["additionalProperties"] = convert(value, defs, at=f"{at}{{}}")
    elif value is True:
        out["x-kubernetes-preserve-unknown-fields"] = True


def _scalar_keyword(out: dict[str, Any], key: str, value: Any, *, at: str) -> None:
    if key in _COPIED:
        out[key] = value
    elif key == "const":
        out["enum"] = [value]
    elif key in ("exclusiveMinimum", "exclusiveMaximum"):
        # JSON Schema 2020-12 gives the bound; OpenAPI v3 (JSONSchemaProps) a flag on minimum/maximum.
        out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
        out[key] = True
    elif key == "pattern":
        # The API server compiles patterns with Go's regexp (ValidateCustomResourceDefinitionOpenAPISchema);
        # a Python-only construct would make it refuse the whole CRD. Such a pattern is left out:
        # the loader still enforces it.
        if re2_compatible(value):
            out[key] = value
    elif key == "default":
        if value is not None:
            out[key] = value
    elif key not in _DROPPED:
        raise UnsupportedSchema(f"{at or '(root)'}: {key!r} has no structural-schema equivalent")


def _resolved(node: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` inlined; the referring field's own keys (its description) win."""
    ref = node.get("$ref")
    if ref is None:
        return dict(node)
    target = defs[str(ref).rsplit("/", 1)[-1]]
    merged = _resolved(target, defs)
    merged.update({k: v for k, v in node.items() if k != "$ref"})
    return merged


def _optional_unwrapped(node: dict[str, Any]) -> dict[str, Any]:
    """An optional field (``anyOf: [X, {type: null}]``) becomes X, and not ``nullable``.

    ``nullable: true`` would cost ``kubectl explain`` the field: the OpenAPI v2 the API server
    publishes drops the type and the properties of every nullable value (ToStructuralOpenAPIV2,
    apiextensions-apiserver/pkg/controller/openapi/v2). An omitted field means the same to the
    loader as a null one, and from v1.20 the API server prunes a null it was not told to keep.
    """
    branches = node.get("anyOf")
    if not isinstance(branches, list) or {"type": "null"} not in branches:
        return node
    rest = [b for b in branches if b != {"type": "null"}]
    out = {k: v for k, v in node.items() if k != "anyOf"}
    if len(rest) == 1:
        return {**rest[0], **out}
    return {**out, "anyOf": rest}


def _union(node: dict[str, Any], defs: Mapping[str, Any], *, at: str) -> dict[str, Any]:
    """A value of several shapes. A structural schema admits exactly one with branches:
    int-or-string. A string-or-number (a YAML number taken as its text) is a string in the API,
    as Kubernetes' own types have it; any other mix keeps the value as written, unchecked here."""
    junctor = next(j for j in _JUNCTORS if j in node)
    branches = [_resolved(b, defs) for b in node[junctor]]
    shared = {k: v for k, v in node.items() if k != junctor}
    types = {b.get("type") for b in branches}
    if types == {"integer", "string"}:
        # Each branch's bounds apply only to its own JSON type (minimum to numbers, pattern to
        # strings), so they mean the same beside the bare anyOf ValidateStructural requires.
        hoisted = {k: v for b in branches for k, v in b.items() if k != "type"}
        out = _untyped(convert({**hoisted, **shared, "type": "string"}, defs, at=at))
        return {**out, "anyOf": list(_INT_OR_STRING), "x-kubernetes-int-or-string": True}
    if types == {"string", "number"}:
        (text,) = (b for b in branches if b.get("type") == "string")
        return convert({**text, **shared}, defs, at=at)
    kept = _untyped(convert({**shared, "type": "object"}, defs, at=at))
    return {**kept, "x-kubernetes-preserve-unknown-fields": True}


def _untyped(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k != "type"}


def _description(text: str) -> str:
    # Docstrings quote code as ``x``; kubectl explain shows the text as it is.
    return text.replace("``", "`")


def re2_compatible(pattern: str) -> bool:
    """Whether Go's regexp (RE2 syntax) compiles ``pattern`` to what Python's ``re`` means by it."""
    try:
        re.compile(pattern)
    except re.error:
        return False
    i, in_class = 0, False
    while i < len(pattern):
        char, following = pattern[i], pattern[i + 1: i + 2]
        if char == "\\":
            if following in _PYTHON_ONLY_ESCAPES:
                return False
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            i = _class_body_start(pattern, i)
            continue
        elif char == "(" and following == "?" and not _GO_GROUP.match(pattern, i + 1):
            return False  # lookaround, atomic group, conditional, (?P=name), a flag Go lacks
        elif char in "*+?}" and following == "+":
            return False  # a possessive quantifier
        elif char == "{" and following == ",":
            return False  # Python's {,n}; Go reads it as literal text
        i += 1
    return True


def _class_body_start(pattern: str, at: int) -> int:
    """The index after ``[`` (and ``^``) and a leading ``]``, which is literal there."""
    i = at + 1
    if pattern[i: i + 1] == "^":
        i += 1
    if pattern[i: i + 1] == "]":
        i += 1
    return i
