"""Label selectors compiled once and matched many times, and node selector requirements.

``Selector`` is ``metav1.LabelSelectorAsSelector``'s result: a nil selector is
``labels.Nothing()`` (matches nothing), an empty one ``labels.Everything()``. It is parsed and
validated once, for the scheduler's hot loops where one selector meets every pod of a cluster;
what a requirement accepts and whether it holds are ``webhook.kube.selectors``'
(``requirement_error`` and ``holds``, ``Requirement.Matches``), and ``explain`` defers to
``selectors.mismatch``.

``NodeRequirement`` is a ``NodeSelectorRequirement`` compiled the same way
(nodeaffinity.nodeSelectorRequirementsAsSelector in k8s.io/component-helpers/scheduling/corev1/
nodeaffinity): an invalid one carries its ``error``, and the term holding it matches no node.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.kube import selectors
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
            if not selectors.holds(op, labels.get(key), values):
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


def _check(key: str, op: str, values: Sequence[str]) -> None:
    error = selectors.requirement_error(key, op, values)
    if error:
        raise ValueError(error)


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
        _check(str(key), "In", [str(value)])
        equal.append((str(key), str(value)))
    others: list[tuple[str, str, frozenset[str]]] = []
    for expr in expressions:
        key, op = str(expr.get("key", "")), str(expr.get("operator", ""))
        values = [str(v) for v in expr.get("values") or ()]
        _check(key, op, values)
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
        ordered = not field and self.op in selectors.ORDERED_OPERATORS and len(raw) == 1
        self.bound = parse_int64(raw[0]) if ordered else None
        self.error = selectors.field_requirement_error(self.op, raw) if field \
            else selectors.requirement_error(self.key, self.op, raw, node=True)

    def matches(self, value: str | None) -> bool:
        """``Requirement.Matches`` given the node's value for the key (None: no such key)."""
        return selectors.holds(self.op, value, self.values, self.bound)

    def describe(self) -> str:
        shown = f" [{', '.join(sorted(self.values))}]" if self.values else ""
        return f"{self.key} {self.op}{shown}"
