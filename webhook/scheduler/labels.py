"""Label selectors compiled once and matched many times, and node selector requirements.

``Selector`` is ``metav1.LabelSelectorAsSelector``'s result: a nil selector is
``labels.Nothing()`` (matches nothing), an empty one ``labels.Everything()``. Its matching is
``webhook.kube.selectors.matches`` (the project's single statement of the rule, which the
tests hold this compiled form to) precomputed for the scheduler's hot loops, where one
selector meets every pod of a cluster; ``explain`` defers to ``selectors.mismatch``.

``NodeRequirement`` is ``labels.NewRequirement`` + ``Requirement.Matches`` for a
``NodeSelectorRequirement`` (nodeaffinity.nodeSelectorRequirementsAsSelector in
k8s.io/component-helpers/scheduling/corev1/nodeaffinity): Gt and Lt need exactly one value and
both sides must parse as ``strconv.ParseInt(s, 10, 64)``, else the requirement is invalid
(the value) or does not match (the label).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.kube import selectors
from webhook.kube.names import label_value_error, qualified_name_error
from webhook.kube.nodes import parse_int64  # strconv.ParseInt(v, 10, 64), the one reading

__all__ = ["EVERYTHING", "NOTHING", "NodeRequirement", "Selector", "compile_selector", "parse_int64", "str_labels"]

def str_labels(labels: Any) -> dict[str, str]:
    """Labels as the API holds them: string to string (a YAML-typed number is its text)."""
    if not isinstance(labels, Mapping):
        return {}
    return {str(k): v if isinstance(v, str) else str(v) for k, v in labels.items()}


class Selector:
    """A compiled ``labels.Selector``: ``matches(labels)`` for string-valued label maps."""

    __slots__ = ("equal", "nothing", "others", "source")

    def __init__(self, equal: Sequence[tuple[str, str]] = (), others: Sequence[tuple[str, str, frozenset[str]]] = (),
                 *, nothing: bool = False, source: Mapping[str, Any] | None = None) -> None:
        self.nothing = nothing
        self.equal = tuple(equal)
        self.others = tuple(others)
        self.source = source

    @property
    def empty(self) -> bool:
        """``Selector.Empty()``: true for ``labels.Everything()`` (and, as in Go, not for Nothing)."""
        return not self.nothing and not self.equal and not self.others

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, wanted in self.equal:
            if labels.get(key) != wanted:
                return False
        for key, op, values in self.others:
            value = labels.get(key)
            if op == "In":
                if value is None or value not in values:
                    return False
            elif op == "NotIn":
                if value is not None and value in values:
                    return False
            elif op == "Exists":
                if value is None:
                    return False
            elif value is not None:  # DoesNotExist
                return False
        return True

    def with_requirements(self, extra: Sequence[tuple[str, str, frozenset[str]]]) -> Selector:
        """The selector ANDed with more requirements (``Selector.Add``); Nothing stays Nothing."""
        if self.nothing or not extra:
            return self
        return Selector(self.equal, self.others + tuple(extra), source=self.source)

    def explain(self, labels: Mapping[str, str]) -> str | None:
        """Why ``labels`` do not match, in ``selectors.mismatch``'s words; None if they do."""
        if self.nothing:
            return "a null labelSelector selects nothing"
        if self.source is None:
            return None if self.matches(labels) else "labels do not match the selector"
        return selectors.mismatch(self.source, labels)

    def __repr__(self) -> str:
        return "Selector(nothing)" if self.nothing else f"Selector({self.equal!r}, {self.others!r})"


NOTHING = Selector(nothing=True)
EVERYTHING = Selector()
_LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


def _check_requirement(key: str, op: str, values: Sequence[str]) -> None:
    """``labels.NewRequirement``'s validation for the label-selector operators."""
    error = qualified_name_error(key)
    if error:
        raise ValueError(f"invalid label key: {error}")
    if op in ("In", "NotIn") and not values:
        raise ValueError(f"{key}: for 'in', 'notin' operators, values set can't be empty")
    if op in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"{key}: values set must be empty for exists and does not exist")
    for value in values:
        error = label_value_error(value)
        if error:
            raise ValueError(f"{key}: {error}")


def compile_selector(selector: Mapping[str, Any] | None) -> Selector:
    """``metav1.LabelSelectorAsSelector``; ``ValueError`` where Go returns an error."""
    if selector is None:
        return NOTHING
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or ()
    if not match_labels and not expressions:
        return Selector(source=selector)
    equal: list[tuple[str, str]] = []
    for key, value in match_labels.items():
        _check_requirement(str(key), "In", [str(value)])
        equal.append((str(key), str(value)))
    others: list[tuple[str, str, frozenset[str]]] = []
    for expr in expressions:
        key, op = str(expr.get("key", "")), str(expr.get("operator", ""))
        values = [str(v) for v in expr.get("values") or ()]
        if op not in _LABEL_OPS:
            raise ValueError(f"{op!r} is not a valid label selector operator")
        _check_requirement(key, op, values)
        others.append((key, op, frozenset(values)))
    return Selector(equal, others, source=selector)


class NodeRequirement:
    """A compiled ``NodeSelectorRequirement`` of ``matchExpressions`` (or, with ``field``, of
    ``matchFields``, where only In/NotIn with one value are valid - nodeSelectorRequirementsAsFieldSelector)."""

    __slots__ = ("bound", "error", "index", "key", "op", "values")

    def __init__(self, expr: Mapping[str, Any], index: int, *, field: bool = False) -> None:
        self.key = str(expr.get("key", ""))
        self.op = str(expr.get("operator", ""))
        raw = [str(v) for v in expr.get("values") or ()]
        self.values = frozenset(raw)
        self.index = index
        self.bound: int | None = None
        self.error = self._field_error(raw) if field else self._label_error(raw)

    def _field_error(self, raw: list[str]) -> str | None:
        if self.op not in ("In", "NotIn"):
            return f"{self.op!r}: supported values: \"In\", \"NotIn\""
        return None if len(raw) == 1 else f"{raw}: must have one element"

    def _label_error(self, raw: list[str]) -> str | None:
        if self.op in ("Gt", "Lt"):
            if len(raw) != 1:
                return "for 'Gt', 'Lt' operators, exactly one value is required"
            self.bound = parse_int64(raw[0])
            if self.bound is None:
                return "for 'Gt', 'Lt' operators, the value must be an integer"
            return qualified_name_error(self.key) or label_value_error(raw[0])
        if self.op not in _LABEL_OPS:
            return f"{self.op!r}: not a valid selector operator"
        try:
            _check_requirement(self.key, self.op, raw)
        except ValueError as exc:
            return str(exc)
        return None

    def matches(self, value: str | None) -> bool:
        """``Requirement.Matches`` given the node's value for the key (None: no such key)."""
        op = self.op
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if value is None or self.bound is None:
            return False
        have = parse_int64(value)
        if have is None:  # a label that is not an integer never satisfies Gt/Lt
            return False
        return have > self.bound if op == "Gt" else have < self.bound

    def describe(self) -> str:
        shown = f" [{', '.join(sorted(self.values))}]" if self.values else ""
        return f"{self.key} {self.op}{shown}"
