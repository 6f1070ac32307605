"""Malformed request bodies, generated from a valid one: what a broken or hostile client sends.

``bodies(valid, rng)`` yields every kind once per round, each a ``Body`` (bytes and the headers
to send them with):

- each field of ``valid`` at every level replaced by a value of each other JSON type, or removed;
- the valid document cut short at many places (truncated JSON);
- strings of a few megabytes in a field, and a body over any sane size limit;
- nesting thousands of levels deep, at the top and inside a field;
- wrong ``apiVersion`` / ``kind`` at the top;
- ``Content-Encoding: gzip`` bodies that do not decode (garbage, cut short), and one that
  decodes to far more than it weighs;
- bytes that are not JSON at all (invalid UTF-8, NaN, a byte-order mark, nothing), and the
  right body under the wrong ``Content-Type``.

Deterministic for a given ``random.Random``: a failure names the body's ``kind`` and the flood
can be replayed.
"""
from __future__ import annotations

import copy
import gzip
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

JSON = {"Content-Type": "application/json"}
# A value of each JSON type, and the edge values of the types Go and msgspec decode strictly.
WRONG_VALUES: tuple[Any, ...] = (None, 0, -1, 1.5, 2**70, True, "", "x", [], [None], {}, {"": None})
MEGABYTE = 1024 * 1024

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Body:
    kind: str
    data: bytes
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON))


def paths(value: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every path below ``value`` (not ``value`` itself), parents before children."""
    children: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        children = list(value.items())
    elif isinstance(value, list):
        children = list(enumerate(value))
    for key, child in children:
        yield (*prefix, key)
        yield from paths(child, (*prefix, key))


def _parent(doc: Any, path: Path) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


def replaced(doc: Any, path: Path, value: Any) -> Any:
    out = copy.deepcopy(doc)
    _parent(out, path)[path[-1]] = value
    return out


def removed(doc: Any, path: Path) -> Any:
    out = copy.deepcopy(doc)
    del _parent(out, path)[path[-1]]
    return out


def wrong_types(valid: Any) -> Iterator[Body]:
    """Each field replaced by each value of another type, and each field removed."""
    for path in paths(valid):
        here = _parent(valid, path)[path[-1]]
        for wrong in WRONG_VALUES:
            if type(wrong) is not type(here) or wrong == here:
                yield Body(f"wrong type at {_name(path)}", json.dumps(replaced(valid, path, wrong)).encode())
        yield Body(f"missing {_name(path)}", json.dumps(removed(valid, path)).encode())


def _name(path: Path) -> str:
    return "/" + "/".join(str(p) for p in path)


def truncated(valid: Any, rng: random.Random, *, count: int = 40) -> Iterator[Body]:
    data = json.dumps(valid).encode()
    for cut in sorted(rng.sample(range(1, len(data)), min(count, len(data) - 1))):
        yield Body(f"truncated at byte {cut}", data[:cut])


def huge(valid: Any) -> Iterator[Body]:
    """Megabyte strings in the deepest string field, in a new key, and a body over 8 MB."""
    strings = [p for p in paths(valid) if isinstance(_parent(valid, p)[p[-1]], str)]
    deepest = max(strings, key=len) if strings else None
    if deepest is not None:
        yield Body(f"a 3 MB string at {_name(deepest)}", json.dumps(replaced(valid, deepest, "x" * 3 * MEGABYTE)).encode())
    yield Body("a 3 MB key", json.dumps({**valid, "k" * 3 * MEGABYTE: 1}).encode())
    yield Body("an 8 MB body", json.dumps({**valid, "padding": "y" * 8 * MEGABYTE}).encode())
    yield Body("a million-element list", json.dumps({**valid, "list": [0] * MEGABYTE}).encode())


def deep(valid: Any, *, depth: int = 100_000) -> Iterator[Body]:
    yield Body(f"{depth} nested lists", b"[" * depth + b"]" * depth)
    yield Body(f"{depth} nested objects, unclosed", b'{"a":' * depth)
    inner = b'{"a":' * (depth // 10) + b"1" + b"}" * (depth // 10)
    top = json.dumps(valid).encode()
    if top.endswith(b"}") and len(valid) > 0:
        yield Body(f"{depth // 10} nested objects inside the document", top[:-1] + b',"deep":' + inner + b"}")
    first = next(paths(valid), None)
    if first is not None:
        marker = json.dumps(replaced(valid, first, "@@DEEP@@")).encode()
        yield Body(f"{depth // 10} nested lists at {_name(first)}",
                   marker.replace(b'"@@DEEP@@"', b"[" * (depth // 10) + b"]" * (depth // 10)))


def wrong_envelope(valid: Any) -> Iterator[Body]:
    for key, values in (("apiVersion", ("admission.k8s.io/v2", "v1", "", "admission.k8s.io/v1/extra")),
                        ("kind", ("AdmissionResponse", "Pod", "", "admissionreview"))):
        for value in values:
            yield Body(f"{key} {value!r}", json.dumps({**valid, key: value}).encode())
    for top in ([valid], "review", 1, None, True):
        yield Body(f"a {type(top).__name__} at the top", json.dumps(top).encode())


def bad_encoding(valid: Any, rng: random.Random) -> Iterator[Body]:
    data = json.dumps(valid).encode()
    zipped = gzip.compress(data)
    gz = {**JSON, "Content-Encoding": "gzip"}
    yield Body("gzip of garbage", rng.randbytes(512), gz)
    yield Body("gzip cut short", zipped[: len(zipped) // 2], gz)
    yield Body("gzip with a broken checksum", zipped[:-8] + bytes(8), gz)
    yield Body("plain JSON labelled gzip", data, gz)
    yield Body("an unknown Content-Encoding", data, {**JSON, "Content-Encoding": "snappy"})
    yield Body("gzip of 64 MB of zeros", gzip.compress(bytes(64 * MEGABYTE), compresslevel=9), gz)


def not_json(valid: Any, rng: random.Random) -> Iterator[Body]:
    data = json.dumps(valid).encode()
    yield Body("an empty body", b"")
    yield Body("invalid UTF-8", data.replace(b'"', b'"\xff\xfe', 1))
    yield Body("a byte-order mark", b"\xef\xbb\xbf" + data)
    yield Body("NaN", data[:-1] + b',"nan":NaN}' if data.endswith(b"}") else b"NaN")
    yield Body("a trailing comma", data[:-1] + b",}" if data.endswith(b"}") else data + b",")
    yield Body("two documents", data + data)
    yield Body("random bytes", rng.randbytes(256))
    yield Body("YAML, not JSON", b"apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n")
    yield Body("text/plain", data, {"Content-Type": "text/plain"})
    yield Body("no Content-Type", data, {})


def bodies(valid: Any, rng: random.Random) -> list[Body]:
    """One round of every kind of malformed body made from ``valid``."""
    return [
        *wrong_types(valid), *truncated(valid, rng), *huge(valid), *deep(valid),
        *wrong_envelope(valid), *bad_encoding(valid, rng), *not_json(valid, rng),
    ]


def flood(valids: list[Any], rng: random.Random, count: int) -> Iterator[Body]:
    """``count`` bodies: rounds of ``bodies`` over each valid document in turn, shuffled."""
    rounds = [body for valid in valids for body in bodies(valid, rng)]
    sent = 0
    while sent < count:
        order = list(rounds)
        rng.shuffle(order)
        for body in order[: count - sent]:
            yield body
        sent += min(len(order), count - sent)
