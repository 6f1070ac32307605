"""Turning pydantic validation errors into ``file:line: field.path: message`` for humans.

Pydantic reports locations in model terms (with union tags and ``[key]`` markers) and
messages meant for programmers; policy authors need the YAML path they wrote, the line it
is on, and a hint ("did you mean ...?") when a field name is misspelt.
"""
from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from webhook.files.documents import Document
from webhook.policy.model import PlacementPolicy

__all__ = ["LoadError", "did_you_mean", "format_path", "from_validation", "located"]

PathT = tuple[str | int, ...]
_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class LoadError:
    """One problem in a policy file; ``str()`` is ``file:line: field: message``."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = located(self.file, self.line)
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


def located(file: str, line: int) -> str:
    """``file:line``, or ``file`` alone when no line is to blame (0: a policy read from the
    cluster, ``cluster:PlacementPolicy/<name>``, has no lines)."""
    return f"{file}:{line}" if line > 0 else file


def format_path(path: Sequence[str | int]) -> str:
    """``("spec", "match", "kinds", 0)`` -> ``spec.match.kinds[0]``; odd keys in brackets."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif _SIMPLE_KEY.match(step):
            out += f".{step}" if out else step
        else:
            out += f"[{step}]"
    return out


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``; did you mean "X"?`` for the closest choice, or ``""`` when nothing is close."""
    options = list(choices)
    by_case = {c.lower(): c for c in options}
    best = by_case.get(word.lower())
    if best is None:
        close = difflib.get_close_matches(word.lower(), list(by_case), n=1, cutoff=0.6)
        best = by_case[close[0]] if close else None
    return f'; did you mean "{best}"?' if best else ""


def from_validation(exc: ValidationError, *, doc: Document, base: PathT, data: Any,
                    root: type[BaseModel] = PlacementPolicy) -> list[LoadError]:
    """One :class:`LoadError` per pydantic error, at the line of the field it is about;
    ``root`` is the model validated (field names for "did you mean" come from it)."""
    errors = []
    for err in exc.errors(include_url=False):
        path = _data_path(data, err["loc"], last_is_name=err["type"] in ("missing", "extra_forbidden"))
        at = (err.get("ctx") or {}).get("at")
        if at:
            path += tuple(at)
        full = base + path
        message = _message(err, path, root)
        errors.append(LoadError(doc.file, doc.line_of(full), format_path(full), message))
    return errors


def _data_path(data: Any, loc: Sequence[str | int], *, last_is_name: bool) -> PathT:
    """The part of pydantic's ``loc`` that exists in the data (drops union tags, ``[key]``)."""
    path: list[str | int] = []
    cur = data
    for i, step in enumerate(loc):
        if _has(cur, step):
            cur = cur[step]
        elif last_is_name and i == len(loc) - 1 and isinstance(step, str):
            cur = None
        else:
            continue
        path.append(step)
    return tuple(path)


def _has(container: Any, step: str | int) -> bool:
    if isinstance(container, dict):
        return step in container
    return isinstance(container, list) and isinstance(step, int) and 0 <= step < len(container)


def _message(err: Any, path: PathT, root: type[BaseModel] = PlacementPolicy) -> str:
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        name = str(path[-1]) if path else "?"
        allowed = allowed_fields(path[:-1], root)
        hint = did_you_mean(name, allowed) or f" (allowed: {', '.join(sorted(allowed))})"
        return f'unknown field "{name}"{hint}'
    key_note = "key " if "[key]" in err["loc"] else ""
    if kind == "policy":
        return key_note + str(ctx.get("msg", err["msg"]))
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, not {_show(value)}"
    if kind == "too_short":
        return "must not be empty"
    if kind in ("greater_than_equal", "less_than_equal"):
        bound = "at least" if kind == "greater_than_equal" else "at most"
        limit = ctx.get("ge", ctx.get("le"))
        return f"must be {bound} {limit}, not {_show(value)}"
    for suffix, noun in _TYPE_NOUNS.items():
        if kind.endswith(suffix):
            return f"must be {noun}, not {_kind_of(value)}"
    msg = str(err["msg"])
    return key_note + msg[:1].lower() + msg[1:]


_TYPE_NOUNS = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "string_type": "a string",
    "bool_type": "a boolean",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _show(value: Any) -> str:
    return repr(value) if not isinstance(value, (dict, list)) else _kind_of(value)


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    names = {dict: "a mapping", list: "a list", str: "a string", int: "an integer", float: "a number"}
    described = names.get(type(value), "null" if value is None else type(value).__name__)
    return f"{described} ({value!r})" if isinstance(value, (str, int, float)) else described


def allowed_fields(path: Sequence[str | int], root: type[BaseModel] = PlacementPolicy) -> list[str]:
    """Field names (YAML spelling) of the model(s) found at ``path`` in a ``root`` document."""
    models: tuple[type[BaseModel], ...] = (root,)
    for step in path:
        if isinstance(step, int):
            continue
        nxt: list[type[BaseModel]] = []
        for model in models:
            info = _fields_by_alias(model).get(step)
            if info is not None:
                nxt.extend(_models_in(info.annotation))
        models = tuple(nxt)
    return sorted({alias for model in models for alias in _fields_by_alias(model)})


@cache
def _fields_by_alias(model: type[BaseModel]) -> dict[str, FieldInfo]:
    return {info.alias or name: info for name, info in model.model_fields.items()}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """Models reachable through Optional, unions, Annotated, list and dict values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        args = args[:1]
    elif typing.get_origin(annotation) is dict:
        args = args[1:]
    return [m for arg in args for m in _models_in(arg)]
