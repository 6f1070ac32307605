"""The node-side rules beneath the scheduler model, over plain values.

``parse_int64`` and ``label_int`` are how Gt/Lt read integers; ``tolerates`` is
``Toleration.ToleratesTaint`` of k8s.io/api/core/v1. Whether a requirement holds is
``kube.selectors``'; whether a NodeSelectorTerm can match any node is ``kube.nodeterms``'.
Matching a term or a pod against a node is the scheduler model's (``scheduler.nodeaffinity``,
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

