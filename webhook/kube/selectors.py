"""Label selectors (``metav1.LabelSelector``) evaluated as Kubernetes evaluates them.

``matchLabels`` and ``matchExpressions`` are ANDed; ``In``/``NotIn``/``Exists``/``DoesNotExist``
follow ``labels.Requirement.Matches`` (k8s.io/apimachinery/pkg/labels/selector.go): a key is
present when the label set has it, whatever its value, and ``NotIn``/``DoesNotExist`` hold
for a label set without the key. An empty selector selects everything; a null one selects
nothing (``metav1.LabelSelectorAsSelector(nil)`` is ``labels.Nothing()``), which is what a
pod affinity term without a labelSelector means. Label values are strings: a number written
in YAML compares as its text.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["canonical", "matches", "mismatch", "requirement_holds"]


def requirement_holds(operator: str, present: bool, value: Any, values: Sequence[Any]) -> bool | None:
    """One ``LabelSelectorRequirement``; None for an operator label selectors do not have."""
    if operator == "In":
        return present and str(value) in {str(v) for v in values}
    if operator == "NotIn":
        return not present or str(value) not in {str(v) for v in values}
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    return None


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, Any]) -> bool:
    """Whether ``labels`` satisfy ``selector`` (None selects nothing)."""
    return selector is not None and mismatch(selector, labels) is None


def mismatch(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> str | None:
    """Why ``labels`` fail ``selector``, or None when they satisfy it."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if key not in labels or str(labels[key]) != str(value):
            return f"label {key}={value} required, found {_label(labels, key)}"
    for expr in selector.get("matchExpressions") or ():
        key, op = str(expr.get("key", "")), str(expr.get("operator", ""))
        values = expr.get("values") or ()
        holds = requirement_holds(op, key in labels, labels.get(key), values)
        if holds is None:  # the loader rejects other operators; never select on one we do not know
            return f"unknown operator {op!r} for label {key}"
        if not holds:
            shown = f" [{', '.join(str(v) for v in values)}]" if values else ""
            return f"label {key} {op}{shown} does not hold (found {_label(labels, key)})"
    return None


def _label(labels: Mapping[str, Any], key: str) -> str:
    return f"{key}={labels[key]}" if key in labels else "no such label"


def canonical(selector: Mapping[str, Any] | None) -> frozenset[tuple[str, str, frozenset[str]]] | None:
    """The selector's identity: its requirements as a set, ``matchLabels {k: v}`` being the
    requirement ``k In [v]`` (as ``LabelSelectorAsSelector`` builds them), values as a set
    of text. Two selectors with the same identity select the same labels. None stays None
    (a null selector, which selects nothing, is not an empty one, which selects everything)."""
    if selector is None:
        return None
    reqs = {(str(k), "In", frozenset([str(v)])) for k, v in (selector.get("matchLabels") or {}).items()}
    for expr in selector.get("matchExpressions") or ():
        values = frozenset(str(v) for v in expr.get("values") or ())
        reqs.add((str(expr.get("key", "")), str(expr.get("operator", "")), values))
    return frozenset(reqs)
