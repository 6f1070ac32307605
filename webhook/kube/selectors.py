"""Label selectors and node selector requirements, evaluated and validated as Kubernetes does.

Both are ``labels.Requirement`` underneath (k8s.io/apimachinery/pkg/labels/selector.go), so one
function, ``holds``, is ``Requirement.Matches`` for both: ``In``/``NotIn``/``Exists``/
``DoesNotExist`` read whether the key is present and its value, and ``NotIn``/``DoesNotExist``
hold for a label set without the key; ``Gt``/``Lt`` hold only when the key is present and both
its value and the bound parse as ``strconv.ParseInt(s, 10, 64)``.

They differ only in what they accept, and ``requirement_error`` says which:

- a ``metav1.LabelSelector`` has In/NotIn/Exists/DoesNotExist only: ``LabelSelectorAsSelector``
  (apimachinery/pkg/apis/meta/v1/helpers.go) refuses any other operator;
- a ``NodeSelectorRequirement`` of ``matchExpressions`` adds Gt/Lt with exactly one integer
  value (``nodeSelectorRequirementsAsSelector`` in
  k8s.io/component-helpers/scheduling/corev1/nodeaffinity);
- one of ``matchFields`` is In/NotIn with exactly one value
  (``nodeSelectorRequirementsAsFieldSelector``, same package).

For a label selector, ``matchLabels`` and ``matchExpressions`` are ANDed. An empty selector
selects everything; a null one selects nothing (``metav1.LabelSelectorAsSelector(nil)`` is
``labels.Nothing()``), which is what a pod affinity term without a labelSelector means. Label
values are strings: a number written in YAML compares as its text.

``conflict`` says why requirements over one label set can hold together for no label set at
all: lint's "can these selectors select the same object" and "can this node term match any
node" are that one question.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from webhook.kube.names import label_value_error, qualified_name_error
from webhook.kube.nodes import INT64_MAX, label_int, parse_int64

__all__ = ["LABEL_OPERATORS", "ORDERED_OPERATORS", "canonical", "conflict", "field_requirement_error", "holds",
           "matches", "mismatch", "requirement_error"]

LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})  # metav1.LabelSelectorOperator
ORDERED_OPERATORS = frozenset({"Gt", "Lt"})  # what v1.NodeSelectorOperator adds


def holds(operator: str, value: str | None, values: Collection[str], bound: int | None = None) -> bool:
    """``Requirement.Matches``: whether a key whose value is ``value`` (None: the key is
    absent) satisfies the requirement. ``bound`` is the Gt/Lt value already parsed with
    ``parse_int64`` (None: it does not parse, so nothing matches). An operator Kubernetes
    does not have matches nothing."""
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator not in ORDERED_OPERATORS or value is None or bound is None:
        return False
    have = parse_int64(value)
    if have is None:  # a label that is not an integer never satisfies Gt/Lt
        return False
    return have > bound if operator == "Gt" else have < bound


def requirement_error(key: str, operator: str, values: Sequence[str], *, node: bool = False) -> str | None:
    """What ``labels.NewRequirement`` refuses, or None for a valid requirement; ``node`` admits
    the Gt/Lt of a ``NodeSelectorRequirement``, which a label selector does not have."""
    if node and operator in ORDERED_OPERATORS:
        if len(values) != 1:
            return "for 'Gt', 'Lt' operators, exactly one value is required"
        if parse_int64(values[0]) is None:
            return "for 'Gt', 'Lt' operators, the value must be an integer"
        return qualified_name_error(key) or label_value_error(values[0])
    if operator not in LABEL_OPERATORS:
        return f"{operator!r}: not a valid selector operator" if node \
            else f"{operator!r} is not a valid label selector operator"
    error = qualified_name_error(key)
    if error:
        return f"invalid label key: {error}"
    if operator in ("In", "NotIn") and not values:
        return f"{key}: for 'in', 'notin' operators, values set can't be empty"
    if operator in ("Exists", "DoesNotExist") and values:
        return f"{key}: values set must be empty for exists and does not exist"
    for value in values:
        error = label_value_error(value)
        if error:
            return f"{key}: {error}"
    return None


def field_requirement_error(operator: str, values: Sequence[str]) -> str | None:
    """What ``nodeSelectorRequirementsAsFieldSelector`` refuses in a ``matchFields`` requirement."""
    if operator not in ("In", "NotIn"):
        return f"{operator!r}: supported values: \"In\", \"NotIn\""
    return None if len(values) == 1 else f"{list(values)}: must have one element"


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
        if op not in LABEL_OPERATORS:  # the loader rejects other operators; never select on one we do not know
            return f"unknown operator {op!r} for label {key}"
        if not holds(op, str(labels[key]) if key in labels else None, {str(v) for v in values}):
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


# --- can requirements hold together -------------------------------------------------------


def conflict(requirements: Iterable[Mapping[str, Any]]) -> str | None:
    """Why no label set satisfies all ``requirements`` (ANDed, each ``{key, operator, values}``),
    or None when some label set could.

    Per key they conflict when one needs the label absent and another needs it (DoesNotExist
    with In, Exists, Gt or Lt), when no value is left (In sets that do not meet, or every In
    value excluded by NotIn or by the Gt/Lt bounds), or when the Gt/Lt bounds leave no integer.
    A Gt/Lt value the scheduler cannot read (``label_int``) matches nothing.
    """
    reqs = requirements if isinstance(requirements, list) else list(requirements)
    keys: set[str] = set()
    for req in reqs:  # most terms: one requirement per key, each able to hold by itself
        key = str(req.get("key"))
        if key in keys or not _holds_alone(req):
            return _grouped_conflict(reqs)
        keys.add(key)
    return None


def _grouped_conflict(requirements: list[Mapping[str, Any]]) -> str | None:
    """``conflict``, key by key in the order the keys first appear."""
    by_key: dict[str, list[Mapping[str, Any]]] = {}
    for req in requirements:
        by_key.setdefault(str(req.get("key")), []).append(req)
    for key, reqs in by_key.items():
        if len(reqs) == 1 and _holds_alone(reqs[0]):
            continue
        why = _key_conflict(key, reqs)
        if why is not None:
            return why
    return None


_HOLD_ALONE = frozenset({"NotIn", "Exists", "DoesNotExist"})


def _holds_alone(req: Mapping[str, Any]) -> bool:
    """Whether one requirement, alone on its key, can hold, told without ``_key_conflict``'s
    sets (most keys of a node term have one requirement): all but an In without values and a
    Gt/Lt bound can. Gt/Lt, and values that are not a list, take the long way."""
    values = req.get("values")
    if values is not None and type(values) is not list:
        return False
    op = req.get("operator")
    return op in _HOLD_ALONE or (op == "In" and bool(values))


def _show(key: str, req: Mapping[str, Any]) -> str:
    values = req.get("values")
    return f"{key} {req.get('operator')}" + (f" [{', '.join(map(str, values))}]" if values else "")


def _key_conflict(key: str, reqs: list[Mapping[str, Any]]) -> str | None:
    present = [r for r in reqs if r.get("operator") in ("In", "Exists", "Gt", "Lt")]
    absent = [r for r in reqs if r.get("operator") == "DoesNotExist"]
    if present and absent:
        return f"{_show(key, absent[0])} and {_show(key, present[0])}"
    allowed: set[str] | None = None
    low, high = -1, INT64_MAX + 1  # the label, as an integer, must lie strictly between
    for req in reqs:
        op, values = req.get("operator"), [str(v) for v in req.get("values") or ()]
        if op == "In":
            allowed = set(values) if allowed is None else allowed & set(values)
        elif op in ORDERED_OPERATORS:
            bound = label_int(values[0]) if len(values) == 1 else None
            if bound is None:
                return f"{_show(key, req)} is not an integer the scheduler can read"
            low, high = (max(low, bound), high) if op == "Gt" else (low, min(high, bound))
    if high - low <= 1:
        shown = " and ".join(_show(key, r) for r in reqs if r.get("operator") in ORDERED_OPERATORS)
        return f"no integer satisfies {shown}"
    if allowed is None:
        return None
    forbidden = {str(v) for r in reqs if r.get("operator") == "NotIn" for v in r.get("values") or ()}
    left = allowed - forbidden
    if (low, high) != (-1, INT64_MAX + 1):
        left = {v for v in left if (n := parse_int64(v)) is not None and low < n < high}
    if not left:
        return " and ".join(_show(key, r) for r in reqs if r.get("operator") in ("In", "NotIn", "Gt", "Lt"))
    return None
