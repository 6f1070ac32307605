"""JSON for the server: msgspec's C codec, with the standard library wherever the two differ.

Kept because it is worth more than 10% of the server's CPU per review (parsing the review
and encoding the answer and the log line). msgspec reads every integer exactly, and it is
strict where the standard library is lenient, so the two are combined to behave exactly like
``json.loads`` / ``json.dumps`` for every input:

- ``loads``: what msgspec refuses, the standard library reads or rejects as before: NaN and
  Infinity, numbers beyond the float range, lone surrogates, UTF-16/32 and byte-order marks,
  and malformed JSON, whose error messages (line and column) stay the familiar ones.
- ``dumps``: msgspec writes NaN and the infinities as ``null``; the standard library keeps
  them as ``NaN``/``Infinity``. Such values can only come from a lenient parse, so any
  ``null`` in msgspec's output sends the value through the standard library instead.
  Values msgspec cannot encode at all (keys that are not strings, lone surrogates) go
  there too. ``bytes`` are written as a base64 string by both, as msgspec does (the
  AdmissionReview ``patch`` field).
"""
from __future__ import annotations

import base64
import json
from typing import Any

import msgspec

__all__ = ["dumps", "dumps_line", "loads"]

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


def _base64(value: Any) -> str:
    """``bytes`` as msgspec writes them: standard base64 with padding."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_stdlib = json.JSONEncoder(separators=(",", ":"), default=_base64)  # ASCII: lone surrogates become escapes
_line_encoder = msgspec.json.Encoder(enc_hook=str)
_line_stdlib = json.JSONEncoder(separators=(",", ":"), default=str)


def loads(data: bytes | str) -> Any:
    """``json.loads(data)``, at msgspec's speed whenever msgspec can read ``data``."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError:
        return json.loads(data)  # reads what is lenient JSON, raises what is not JSON


def dumps(value: Any, *, floats: bool = True) -> bytes:
    """Compact UTF-8 JSON of ``value``, the same document ``json.dumps`` would give
    (which has no form for ``bytes``: they are written as base64 strings).

    ``floats=False`` says ``value`` holds no float (an AdmissionReview answer): only a float
    can be NaN or infinite, so msgspec's output is not searched for the ``null`` it writes
    for them, a search as long as the output.
    """
    try:
        out = _encoder.encode(value)
    except (TypeError, ValueError, msgspec.EncodeError):  # non-string keys, lone surrogates
        return _stdlib.encode(value).encode()
    if floats and b"null" in out:  # a None, or a NaN/Infinity that msgspec would have turned into null
        return _stdlib.encode(value).encode()
    return out


def dumps_line(value: Any) -> str:
    """One log line: JSON in which a value of any other type is written as its ``str``.

    Unlike ``dumps``, NaN and the infinities become ``null``: a log pipeline's JSON parser
    would reject the whole line for them.
    """
    try:
        return _line_encoder.encode(value).decode()
    except (TypeError, ValueError, msgspec.EncodeError):  # non-string keys, lone surrogates
        return _line_stdlib.encode(value)
