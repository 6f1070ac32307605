"""The node-side rules beneath the scheduler model, over plain values.

``parse_int64`` and ``label_int`` are how Gt/Lt read integers; ``tolerates`` is
``Toleration.ToleratesTaint`` of k8s.io/api/core/v1; ``term_contradiction`` says why a
NodeSelectorTerm can match no node at all (what lint and the engine report). Matching a
term or a pod against a node is the scheduler model's (``scheduler.nodeaffinity``,
``scheduler.filters.NodeEligibility``): one implementation, used everywhere.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

INT64_MAX = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,63}")
_SIGNED = re.compile(r"[+-]?[0-9]+")


def parse_int64(value: Any) -> int | None:
    """``strconv.ParseInt(value, 10, 64)``: an optional sign and decimal digits (no ``_``,
    no spaces) within the int64 range; None where ParseInt returns an error."""
    text = str(value)
    if not _SIGNED.fullmatch(text):
        return None
    number = int(text)
    return number if -INT64_MAX - 1 <= number <= INT64_MAX else None


def label_int(value: Any) -> int | None:
    """The integer a ``Gt``/``Lt`` requirement compares, or None when there is none.

    ``labels.NewRequirement`` (apimachinery/pkg/labels/selector.go) reads a requirement's
    value with ``strconv.ParseInt(v, 10, 64)`` and also validates it as a label value, and
    ``Requirement.Matches`` reads the node's label with the same ``ParseInt``; a label value
    cannot start with a sign, so what both accept is digits only (no ``_``, no spaces, no
    sign), at most 2^63-1. Anything else matches no node.
    """
    text = str(value)
    if not _DIGITS.fullmatch(text):
        return None
    number = int(text)
    return number if number <= INT64_MAX else None


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint`` of k8s.io/api/core/v1."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    return op == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def term_contradiction(term: Mapping[str, Any]) -> str | None:
    """Why a NodeSelectorTerm can match no node, or None when some node could satisfy it.

    The term's requirements are ANDed; per key they contradict when one needs the label
    absent and another needs it (DoesNotExist with In, Exists, Gt or Lt), when no value is
    left (In sets that do not meet, or every In value excluded by NotIn or by the Gt/Lt
    bounds), or when the Gt/Lt bounds leave no integer. A Gt/Lt value the scheduler cannot
    parse matches nothing. Node names in matchFields follow the same rules.
    """
    exprs = list(term.get("matchExpressions") or ())
    fields = list(term.get("matchFields") or ())
    if not exprs and not fields:
        return "the term is empty"
    by_key: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for kind, reqs in (("label", exprs), ("field", fields)):
        for req in reqs:
            by_key.setdefault((kind, str(req.get("key"))), []).append(req)
    for (_kind, key), reqs in by_key.items():
        why = _key_contradiction(key, reqs)
        if why is not None:
            return why
    return None


def _key_contradiction(key: str, reqs: list[Mapping[str, Any]]) -> str | None:
    def show(req: Mapping[str, Any]) -> str:
        values = req.get("values")
        return f"{key} {req.get('operator')}" + (f" [{', '.join(map(str, values))}]" if values else "")

    present = [r for r in reqs if r.get("operator") in ("In", "Exists", "Gt", "Lt")]
    absent = [r for r in reqs if r.get("operator") == "DoesNotExist"]
    if present and absent:
        return f"{show(absent[0])} and {show(present[0])}"
    allowed: set[str] | None = None
    low, high = -1, INT64_MAX + 1  # the label, as an integer, must lie strictly between
    for req in reqs:
        op, values = req.get("operator"), [str(v) for v in req.get("values") or ()]
        if op == "In":
            allowed = set(values) if allowed is None else allowed & set(values)
        elif op in ("Gt", "Lt"):
            bound = label_int(values[0]) if len(values) == 1 else None
            if bound is None:
                return f"{show(req)} is not an integer the scheduler can read"
            low, high = (max(low, bound), high) if op == "Gt" else (low, min(high, bound))
    if high - low <= 1:
        return f"no integer satisfies {' and '.join(show(r) for r in reqs if r.get('operator') in ('Gt', 'Lt'))}"
    if allowed is None:
        return None
    forbidden = {str(v) for r in reqs if r.get("operator") == "NotIn" for v in r.get("values") or ()}
    left = allowed - forbidden
    if (low, high) != (-1, INT64_MAX + 1):
        left = {v for v in left if (n := parse_int64(v)) is not None and low < n < high}
    if not left:
        return " and ".join(show(r) for r in reqs if r.get("operator") in ("In", "NotIn", "Gt", "Lt"))
    return None
