"""Resource quantities parsed with ``resource.ParseQuantity``'s grammar (apimachinery quantity.go)."""
from __future__ import annotations

from fractions import Fraction

import pytest

from webhook.kube.quantity import QuantityError, ceil_scaled, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("4Gi", 4 * 2**30),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1e+3", 1000),
        ("5e-3", Fraction(5, 1000)),
        ("1.5", Fraction(3, 2)),
        ("2k", 2000),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("+5", 5),
        ("-1", -1),
        ("100n", Fraction(1, 10**7)),
        ("1Ei", 2**60),
        ("0", 0),
    ],
)
def test_quantities_parse_like_kubernetes(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


# "1K": K is not a decimal SI suffix (only Ki is); exponents are whole numbers; the parser
# does not trim white space.
@pytest.mark.parametrize("text", ["", "4GB", "lots", "1..2", "Gi", "1K", "1e1.5", " 1", "1 ", "1 Gi", "e3", "1mi"])
def test_malformed_quantities_are_errors(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_a_quantity_in_units_rounds_up() -> None:
    assert ceil_scaled("4Gi", 2**20) == 4096
    assert ceil_scaled("1.5Mi", 2**20) == 2
    assert ceil_scaled("500m", Fraction(1, 1000)) == 500
