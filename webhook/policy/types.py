"""Scalar field types of the policy language: names, label keys and values, quantities.

Each type is a plain ``str``/``int`` after validation, so the dumped spec is plain data.
Errors are raised as :func:`fail` so the message reads as written (no pydantic prefix) and
may point the loader at a sub-field (``at``) that the error is really about.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, NoReturn

from pydantic import Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from webhook.kube import names
from webhook.kube.quantity import parse_quantity

__all__ = [
    "DnsLabel",
    "DnsSubdomain",
    "FieldValue",
    "Glob",
    "IntOrPercent",
    "LabelKey",
    "LabelValue",
    "NonNegativeInt",
    "Percent",
    "Quantity",
    "Text",
    "Weight",
    "fail",
]

_PERCENT_RE = re.compile(r"^(\d+)%$")


def fail(message: str, *, at: Sequence[str | int] = ()) -> NoReturn:
    """Reject a value; ``at`` is a path below the validated object that the error is about."""
    ctx: dict[str, Any] = {"msg": message}
    if at:
        ctx["at"] = list(at)
    raise PydanticCustomError("policy", "{msg}", ctx)


def _text(value: Any) -> str:
    """A string, accepting YAML numbers as their text but not booleans."""
    if isinstance(value, bool):
        word = "true" if value else "false"
        fail(f'{word} is a YAML boolean, not a string; quote it ("{word}")')
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        fail(f"must be a string, not {_type_name(value)}")
    return value


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", type(None): "null"}.get(type(value), type(value).__name__)


def _checked(check: Callable[[str], str | None]) -> Callable[[Any], str]:
    def validate(value: Any) -> str:
        text = _text(value)
        error = check(text)
        if error:
            fail(error)
        return text

    return validate


def _strict_str(check: Callable[[str], str | None]) -> Callable[[Any], str]:
    def validate(value: Any) -> str:
        if not isinstance(value, str):
            fail(f"must be a string, not {_type_name(value)}")
        error = check(value)
        if error:
            fail(error)
        return value

    return validate


def _non_empty(value: str) -> str | None:
    return "must not be empty" if not value else None


def _int_or_percent(value: Any) -> int | str:
    # Kubernetes IntOrString for rolling updates: an int, or a string "N%".
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        fail(f"must be an integer or a percentage like '25%', not {_type_name(value)}")
    if isinstance(value, int):
        if value < 0:
            fail("must be greater than or equal to 0")
        return value
    if not _PERCENT_RE.match(value):
        fail(f"{value!r} must be an integer or a percentage like '25%'")
    return value


def _percent(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str):
        fail(f"must be a percentage string like '70%', not {_type_name(value)}")
    match = _PERCENT_RE.match(value)
    if not match or int(match.group(1)) > 100:
        fail(f"{value!r} must be a percentage from '0%' to '100%'")
    return value


def _quantity(value: Any) -> str:
    text = _text(value)
    try:
        amount = parse_quantity(text)
    except ValueError as exc:
        fail(str(exc))
    if amount <= 0:
        fail(f"{text!r} must be greater than zero")
    return text


def _kube_name(check: Callable[[str], str | None], *, max_length: int) -> tuple[PlainValidator, WithJsonSchema]:
    """The metadata of a Kubernetes name type: a string as written (no YAML number), passing ``check``."""
    return (
        PlainValidator(_strict_str(check)),
        WithJsonSchema({"type": "string", "minLength": 1, "maxLength": max_length}),
    )


# YAML numbers are accepted where Kubernetes wants a string (they are quoted for you).
_STRING = {"anyOf": [{"type": "string"}, {"type": "number"}]}

LabelKey = Annotated[str, *_kube_name(names.qualified_name_error, max_length=317)]
LabelValue = Annotated[
    str,
    PlainValidator(_checked(names.label_value_error)),
    WithJsonSchema({"anyOf": [{"type": "string", "maxLength": 63}, {"type": "number"}]}),
]
DnsSubdomain = Annotated[str, *_kube_name(names.dns_subdomain_error, max_length=253)]
DnsLabel = Annotated[str, *_kube_name(names.dns_label_error, max_length=63)]
# Values of matchFields (node names) are checked by their term, which knows the operator.
FieldValue = Annotated[str, PlainValidator(_text), WithJsonSchema(_STRING)]
Text = Annotated[str, PlainValidator(_text), WithJsonSchema(_STRING)]
Glob = Annotated[str, PlainValidator(_checked(_non_empty)), WithJsonSchema({"type": "string", "minLength": 1})]
IntOrPercent = Annotated[
    int | str,
    PlainValidator(_int_or_percent),
    WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": r"^\d+%$"}]}),
]
Percent = Annotated[
    str, PlainValidator(_percent), WithJsonSchema({"type": "string", "pattern": r"^(100|[1-9]?\d)%$"})
]
Quantity = Annotated[
    str,
    PlainValidator(_quantity),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number", "exclusiveMinimum": 0}]}),
]
Weight = Annotated[int, Field(strict=True, ge=1, le=100)]
NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]
