"""Kubernetes resource quantities (``500m``, ``4Gi``, ``1e3``), parsed exactly.

The grammar is ``resource.ParseQuantity``'s (k8s.io/apimachinery/pkg/api/resource/quantity.go)::

    <quantity>        ::= <signedNumber><suffix>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>
    <number>          ::= <digits> | <digits> "." | <digits> "." <digits> | "." <digits>

with an integer exponent and no surrounding white space (the parser does not trim).
Values are ``Fraction``s, so ``0.1`` of something is exactly a tenth of it.
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["QuantityError", "ceil_scaled", "parse_quantity"]

_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    **{s: Fraction(2 ** (10 * (i + 1))) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
}
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))(?:[eE](?P<exponent>[+-]?\d+)|(?P<suffix>[KMGTPE]i|[numkMGTPE])?)"
)


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity; ``QuantityError`` when ``text`` is not one."""
    match = _QUANTITY.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise QuantityError(f"{text!r} is not a valid quantity (examples: 1, 500m, 4Gi, 10G)")
    number = Fraction(match["number"])
    if match["exponent"] is not None:
        return number * Fraction(10) ** int(match["exponent"])
    return number * _SUFFIXES[match["suffix"] or ""]


def ceil_scaled(text: str, unit: Fraction | int) -> int:
    """The quantity in ``unit``s, rounded up: "at least q" is "at least ceil(q / unit) units"."""
    return math.ceil(parse_quantity(text) / Fraction(unit))
