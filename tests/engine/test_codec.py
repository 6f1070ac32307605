"""The hot-path JSON codec reads and writes exactly what the standard library does."""
from __future__ import annotations

import base64
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook import codec
from webhook.engine import patching

# JSON values with integers far beyond 64 bits and strings of any valid code point (lone
# surrogates, which hypothesis does not draw, have their own cases below).
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(value=_json)
def test_loads_reads_what_json_loads_reads(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        data = text.encode()
        assert patching.same(codec.loads(data), json.loads(data))


@settings(max_examples=400, deadline=None)
@given(value=_json)
def test_dumps_writes_a_document_that_reads_back_as_the_value(value: Any) -> None:
    out = codec.dumps(value)
    assert isinstance(out, bytes)
    assert patching.same(json.loads(out), value)
    assert patching.same(codec.loads(out), value)


_no_floats = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(value=_no_floats)
def test_a_value_without_floats_is_the_same_document_whether_or_not_it_is_searched_for_nan(value: Any) -> None:
    assert json.loads(codec.dumps(value, floats=False)) == json.loads(codec.dumps(value))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("123456789012345678901234567890", 123456789012345678901234567890),  # beyond 64 bits: exact
        ("-9223372036854775809", -9223372036854775809),
        ("18446744073709551616", 18446744073709551616),
        ("1.0", 1.0),  # a float stays a float
        ('{"a": 1, "a": 2}', {"a": 2}),  # duplicate keys: the last wins, as in json.loads
    ],
)
def test_numbers_and_duplicate_keys_read_like_json_loads(text: str, expected: Any) -> None:
    value = codec.loads(text.encode())
    assert patching.same(value, expected)
    assert patching.same(value, json.loads(text))


@pytest.mark.parametrize(
    "data",
    [
        b"NaN",
        b"[Infinity, -Infinity]",
        b"1e400",  # beyond the float range: inf, as json.loads reads it
        b'"\\ud800"',  # a lone surrogate escape
        b"\xef\xbb\xbf{}",  # a UTF-8 byte-order mark
        '{"a": "é"}'.encode("utf-16"),  # UTF-16, which json.loads detects
    ],
)
def test_what_msgspec_refuses_but_json_loads_reads_is_still_read(data: bytes) -> None:
    expected = json.loads(data)
    value = codec.loads(data)
    assert json.dumps(value) == json.dumps(expected)


@pytest.mark.parametrize("data", [b"", b"{", b'{"a": }', b"[1,]", b"\xff", b'{"a": 1} x'])
def test_malformed_json_raises_the_standard_library_error(data: bytes) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(data)
    with pytest.raises(ValueError) as raised:
        codec.loads(data)
    assert type(raised.value) is type(expected.value)
    assert str(raised.value) == str(expected.value)


def test_dumps_keeps_non_finite_floats_as_json_dumps_does() -> None:
    """msgspec alone would write null and so change the user's value in a patch."""
    value = {"weight": math.nan, "limits": [math.inf, -math.inf], "unset": None}
    assert codec.dumps(value) == json.dumps(value, separators=(",", ":")).encode()


def test_dumps_falls_back_for_what_msgspec_cannot_encode() -> None:
    assert codec.dumps({1: "a"}) == b'{"1":"a"}'
    assert codec.dumps(["\ud800"]) == b'["\\ud800"]'


@pytest.mark.parametrize(
    "value",
    [
        {"patch": b'[{"op":"add"}]'},  # msgspec writes it
        {"patch": b'[{"op":"add"}]', "ratio": math.nan},  # the standard library writes it
        {"patch": b"\x9e\xe9e"},  # base64 "null": msgspec's output has a "null" in it
        {"patch": b"ab", 1: "a"},  # msgspec cannot write the key
        {"patch": bytearray(b"\x00\xff"), "view": memoryview(b"ab")},
    ],
)
def test_dumps_writes_bytes_as_base64_whichever_encoder_runs(value: dict[Any, Any]) -> None:
    """The AdmissionReview ``patch`` is base64; the server hands the encoder the raw bytes."""
    expected = {str(k): (base64.b64encode(v).decode() if isinstance(v, (bytes, bytearray, memoryview)) else v)
                for k, v in value.items()}
    assert codec.dumps(value) == json.dumps(expected, separators=(",", ":")).encode()


def test_dumps_still_refuses_what_json_has_no_form_for() -> None:
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        codec.dumps({1: object()})


def test_dumps_writes_compact_utf8() -> None:
    assert codec.dumps({"a": [1, "é"], "b": True}) == '{"a":[1,"é"],"b":true}'.encode()


def test_log_lines_write_any_value_as_its_str_and_non_finite_floats_as_null() -> None:
    line = json.loads(codec.dumps_line({"error": ValueError("boom"), "ms": math.nan, "n": 1}))
    assert line == {"error": "boom", "ms": None, "n": 1}
    assert json.loads(codec.dumps_line({2: "\ud800"})) == {"2": "\ud800"}
