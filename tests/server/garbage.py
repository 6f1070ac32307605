"""Hypothesis strategies for what a flood of malformed requests holds: random bytes, random JSON
of any type and depth, well-formed documents with one field of the wrong type, nesting thousands of
levels deep, wrong content types, and bodies as large as the server takes.

Shared by the property tests of every HTTP server (tests/server, tests/extender); the checks they
make of each answer are here too, so every server is held to the same promise: never a 5xx for
bad input, and an error is JSON ``{"error": "...", "status": N}``.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Each example shares one in-process client (a function-scoped fixture): answering a request
# leaves nothing behind that the next example could trip over, but counters.
PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# A placeholder string a template carries where a deeply nested value is spliced in as bytes:
# json.dumps itself recurses, and could not write them.
DEEP_MARK = "\x00deep\x00"
_DEEP_JSON = json.dumps(DEEP_MARK).encode()

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def nested(depth: int, *, kind: str, closed: bool) -> bytes:
    """``depth`` levels of arrays or objects around a 1, closed or cut off."""
    opening, closing = (b"[", b"]") if kind == "array" else (b'{"a":', b"}")
    return opening * depth + b"1" + (closing * depth if closed else b"")


deep = st.builds(nested, st.integers(min_value=1, max_value=5000), kind=st.sampled_from(["array", "object"]),
                 closed=st.booleans())


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into ``value``'s objects and arrays, the root's children first."""
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield (*prefix, key)
        yield from paths(child, (*prefix, key))


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``document`` with the value at ``path`` replaced (a copy)."""
    copy = json.loads(json.dumps(document))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return copy


def wrong_types(template: Any) -> st.SearchStrategy[bytes]:
    """``template`` with one of its fields (at any depth) replaced by a random JSON value, or by
    nesting thousands of levels deep."""
    where = st.sampled_from(list(paths(template)))
    shallow = st.builds(lambda p, v: json.dumps(replaced(template, p, v)).encode(), where, json_values)
    spliced = st.builds(lambda p, d: json.dumps(replaced(template, p, DEEP_MARK)).encode().replace(_DEEP_JSON, d),
                        where, deep)
    return st.one_of(shallow, spliced)


def bodies(template: Any, *, limit: int) -> st.SearchStrategy[bytes]:
    """Garbage for an endpoint that reads ``template``-like documents of at most ``limit`` bytes."""
    valid = json.dumps(template).encode()
    return st.one_of(
        st.binary(max_size=2048),
        st.builds(lambda v: json.dumps(v).encode(), json_values),
        deep,
        wrong_types(template),
        st.builds(lambda size: valid + b" " * max(0, size - len(valid)), st.integers(len(valid), limit)),
        st.builds(lambda size: b'"' + b"x" * max(0, size - 2) + b'"', st.integers(2, limit)),
        st.builds(lambda size: b"[" * size, st.integers(1, min(limit, 200_000))),
    )


content_types = st.one_of(
    st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", "application/yaml",
                     "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", "*/*"]),
    st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=30),
)


def headers_for(content_type: str) -> dict[str, str]:
    return {"Content-Type": content_type} if content_type else {}


def assert_error_shape(status: int, body: bytes) -> None:
    """An error answer: the one JSON shape, with the status it was sent with."""
    assert status < 500, f"HTTP {status} for bad input: {body[:300]!r}"
    error = json.loads(body)
    assert isinstance(error, dict) and set(error) == {"error", "status"}, body[:300]
    assert isinstance(error["error"], str) and error["error"], body[:300]
    assert error["status"] == status
