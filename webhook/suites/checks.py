"""Expectations of a PlacementTest case checked against an admission outcome.

Each check returns ``Failure``s with a one-line message and, where it helps, a unified diff
of YAML so an author sees at a glance what admission did differently.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Protocol

import yaml

from webhook.kube.pointers import pointer as to_pointer
from webhook.kube.pointers import resolve
from webhook.suites.model import Expect


class OutcomeLike(Protocol):
    """The parts of ``admission.Outcome`` the checks read."""

    object: dict[str, Any] | None
    patch: list[dict[str, Any]]
    warnings: list[str]
    applied: list[str]
    audited: list[str]
    result: str


@dataclass(frozen=True)
class Failure:
    """One expectation that did not hold."""

    expectation: str  # "object", "patch", "contains", ...
    message: str  # one line
    details: str = ""  # a diff or listing, several lines

    def render(self) -> str:
        head = f"{self.expectation}: {self.message}"
        return f"{head}\n{self.details.rstrip()}" if self.details else head


def check(expect: Expect, outcome: OutcomeLike, *, expected_object: dict[str, Any] | None) -> list[Failure]:
    """Every failed expectation of ``expect`` (``expected_object`` resolves object/objectFile)."""
    failures: list[Failure] = []
    if expected_object is not None:
        failures += _check_object(expected_object, outcome.object)
    if expect.patch is not None:
        failures += _check_patch(expect.patch, outcome.patch)
    if expect.contains is not None:
        failures += _check_contains(expect.contains, outcome.object)
    if expect.absent is not None:
        failures += _check_absent(expect.absent, outcome.object)
    if expect.applied is not None:
        failures += _check_names("applied", expect.applied, outcome.applied)
    if expect.audited is not None:
        failures += _check_names("audited", expect.audited, outcome.audited)
    if expect.warnings is not None:
        failures += _check_warnings(expect.warnings, outcome.warnings)
    if expect.unchanged is not None:
        failures += _check_unchanged(expect.unchanged, outcome.patch)
    if expect.result is not None and expect.result != outcome.result:
        failures.append(Failure("result", f"expected {expect.result!r}, got {outcome.result!r}"))
    return failures


def _check_object(expected: dict[str, Any], actual: dict[str, Any] | None) -> list[Failure]:
    if same(expected, actual):
        return []
    return [Failure("object", "the result differs from the expected object", yaml_diff(expected, actual))]


def _check_patch(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> list[Failure]:
    if same(expected, actual):
        return []
    return [Failure("patch", "the JSON patch differs", yaml_diff(expected, actual))]


def _check_contains(expected: dict[str, Any], actual: dict[str, Any] | None) -> list[Failure]:
    where = mismatch(expected, actual)
    if where is None:
        return []
    shown = project(actual, expected)
    return [Failure("contains", f"the result does not contain {to_pointer(where) or '/'}", yaml_diff(expected, shown))]


def _check_absent(pointers: list[str], actual: dict[str, Any] | None) -> list[Failure]:
    failures = []
    for pointer in pointers:
        found, value = resolve(actual, pointer)
        if found:
            failures.append(Failure("absent", f"{pointer} is present", dump(value)))
    return failures


def _check_names(what: str, expected: list[str], actual: list[str]) -> list[Failure]:
    if sorted(expected) == sorted(actual):
        return []
    return [Failure(what, f"expected {sorted(expected)}, got {sorted(actual)}")]


def _check_warnings(patterns: list[str], warnings: list[str]) -> list[Failure]:
    missing = [p for p in patterns if not any(re.search(p, w) for w in warnings)]
    if not missing:
        return []
    listing = "\n".join(f"  - {w}" for w in warnings) or "  (none)"
    return [Failure("warnings", f"no warning matches {', '.join(map(repr, missing))}", f"warnings were:\n{listing}")]


def _check_unchanged(unchanged: bool, patch: list[dict[str, Any]]) -> list[Failure]:
    if unchanged and patch:
        return [Failure("unchanged", f"expected no patch, got {len(patch)} operation(s)", dump(patch))]
    if not unchanged and not patch:
        return [Failure("unchanged", "expected a change, got no patch")]
    return []


# ---- comparison helpers --------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Deep equality that tells ``true`` from ``1`` and ``"1"`` from ``1`` (YAML authors mean it)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (dict, list, str)) or isinstance(b, (dict, list, str)):
        return type(a) is type(b) and a == b
    return bool(a == b)


def mismatch(expected: Any, actual: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """Where ``actual`` fails to contain ``expected``, or None when it does.

    Maps contain the listed keys; a list contains each listed item in some distinct item of
    its own, in any order; scalars are equal.
    """
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return path
        for key, value in expected.items():
            if key not in actual:
                return path + (key,)
            where = mismatch(value, actual[key], path + (key,))
            if where is not None:
                return where
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return path
        unmatched = _first_unassignable(expected, actual)
        return None if unmatched is None else path + (unmatched,)
    return None if same(expected, actual) else path


def _first_unassignable(expected: list[Any], actual: list[Any]) -> int | None:
    """Index of an expected item no distinct actual item can contain (backtracking search)."""
    fits = [[j for j, a in enumerate(actual) if mismatch(e, a) is None] for e in expected]

    def assign(i: int, used: frozenset[int]) -> bool:
        return i == len(expected) or any(assign(i + 1, used | {j}) for j in fits[i] if j not in used)

    if assign(0, frozenset()):
        return None
    return next((i for i, f in enumerate(fits) if not f), len(expected) - 1)


def project(actual: Any, expected: Any) -> Any:
    """``actual`` cut down to the shape of ``expected``, so a diff shows only what was asked."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return {k: project(actual[k], v) for k, v in expected.items() if k in actual}
    if isinstance(expected, list) and isinstance(actual, list):
        template: dict[str, Any] = {}
        for item in expected:
            if isinstance(item, dict):
                template.update(item)
        return [project(a, template) if template else a for a in actual]
    return actual


def dump(value: Any) -> str:
    """YAML as an author would write it: keys in the object's own order."""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)


def yaml_diff(expected: Any, actual: Any) -> str:
    """A unified diff of the two values' YAML, ``expected`` first."""
    lines = difflib.unified_diff(
        dump(expected).splitlines(), dump(actual).splitlines(), fromfile="expected", tofile="actual", lineterm=""
    )
    return "\n".join(lines)
