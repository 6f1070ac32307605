"""Does a policy select an object? Pure predicates over a ``Subject`` (``match`` and ``exclude``).

Each criterion of a ``match`` or ``exclude`` block becomes one small predicate that
returns ``None`` when it holds and a human reason when it does not; an unset criterion
is not compiled at all, so it matches. The predicates of a policy are built once and
memoised on the policy. Globs are ``fnmatch`` style and case-sensitive.

Decisions where Kubernetes offers no rule:
- ``match.operations`` defaults to CREATE and UPDATE; ``exclude.operations`` to any.
- An object without a namespace (cluster-scoped kinds from a kinds config) never matches
  ``namespaces`` or ``namespaceSelector`` and is never removed by ``excludeNamespaces``.
- ``namespaceSelector`` needs namespace labels from the cluster view. Without
  one, or for a namespace it does not know, the criterion is unknown: in ``match`` it does
  not hold, in ``exclude`` it may, and either way the policy does not apply and the verdict
  is marked ``undecided`` so admission can say why it was left out.
- An ``exclude`` block with no criteria excludes nothing.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase, translate
from typing import TYPE_CHECKING, Any

from webhook.kube import selectors
from webhook.kube.kinds import Target, refers_to
from webhook.kube.pointers import get_path
from webhook.policy.policyset import Policy, PolicySet

if TYPE_CHECKING:  # the cluster view is only consulted through its protocol
    from webhook.cluster.view import ClusterView

DEFAULT_OPERATIONS = ("CREATE", "UPDATE")
_NO_LABELS: Mapping[str, str] = {}


@dataclass(slots=True)
class Subject:
    """What matching looks at: the object's identity, labels and request context (read only)."""

    target: Target
    operation: str
    namespace: str | None
    name: str  # metadata.name, else metadata.generateName, else ""
    labels: Mapping[str, Any]
    annotations: Mapping[str, Any]
    pod_labels: Mapping[str, Any]
    cluster: ClusterView | None = None


class _Miss:
    """A criterion that does not hold. The reason is formatted only when someone reads it:
    with many policies most predicates miss, and most misses are never explained."""

    __slots__ = ("explain", "undecided")

    def __init__(self, explain: Callable[[], str], undecided: bool = False) -> None:
        self.explain, self.undecided = explain, undecided


class Verdict:
    """A decision and the reason for it; ``undecided`` when it needed an unknown cluster fact."""

    __slots__ = ("_explain", "matched", "undecided")

    def __init__(self, matched: bool, explain: Callable[[], str], undecided: bool = False) -> None:
        self.matched, self.undecided, self._explain = matched, undecided, explain

    @property
    def reason(self) -> str:
        return self._explain()

    def __repr__(self) -> str:
        return f"Verdict(matched={self.matched}, reason={self.reason!r}, undecided={self.undecided})"


Predicate = Callable[[Subject], "_Miss | None"]


def subject(
    obj: Mapping[str, Any],
    *,
    target: Target,
    operation: str,
    namespace: str | None,
    cluster: ClusterView | None = None,
) -> Subject:
    """The matching view of ``obj`` (labels and names are read, never copied)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return Subject(
        target=target,
        operation=operation,
        namespace=subject_namespace(obj, namespace),
        name=str(meta.get("name") or meta.get("generateName") or ""),
        labels=_mapping(meta.get("labels")),
        annotations=_mapping(meta.get("annotations")),
        pod_labels=_mapping(get_path(obj, target.pod_labels)),
        cluster=cluster,
    )


def subject_namespace(obj: Mapping[str, Any], namespace: str | None) -> str | None:
    """The namespace matching sees: the request's, else the object's own."""
    if namespace:
        return namespace
    meta = obj.get("metadata")
    return (meta.get("namespace") or None) if isinstance(meta, dict) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else _NO_LABELS


_MATCHED = Verdict(True, lambda: "matched")
_EXCLUDED = Verdict(False, lambda: "excluded: every exclude criterion holds")


def selects(policy: Policy, subj: Subject) -> Verdict:
    """Whether ``policy`` applies: its ``match`` holds and its ``exclude`` does not."""
    match_preds, exclude_preds = _compiled(policy)
    for pred in match_preds:
        miss = pred(subj)
        if miss is not None:
            return Verdict(False, miss.explain, miss.undecided)
    if not exclude_preds:
        return _MATCHED
    # The exclude holds when all its criteria hold. One known not to hold decides: not
    # excluded. One that needs an unknown fact may hold, and an unknown never makes a policy
    # apply (docs/policies.md, "What needs the cluster view"): not matched, undecided.
    unknown: _Miss | None = None
    for pred in exclude_preds:
        miss = pred(subj)
        if miss is None:
            continue
        if not miss.undecided:
            return Verdict(True, _not_excluded(miss.explain))
        unknown = unknown or miss
    if unknown is not None:
        return Verdict(False, _undecidable_exclude(unknown.explain), True)
    return _EXCLUDED


def _const(text: str) -> Callable[[], str]:
    return lambda: text


def _not_excluded(explain: Callable[[], str]) -> Callable[[], str]:
    return lambda: f"matched (not excluded: {explain()})"


def _undecidable_exclude(explain: Callable[[], str]) -> Callable[[], str]:
    return lambda: f"not applied: exclude may hold ({explain()})"


def _compiled(policy: Policy) -> tuple[list[Predicate], list[Predicate]]:
    cached = policy.cache.get("matching")
    if cached is None:
        match = policy.spec.get("match") or {}
        exclude = policy.spec.get("exclude") or {}
        match_preds = compile_criteria(match, policy=policy, default_operations=DEFAULT_OPERATIONS)
        cached = (match_preds, compile_criteria(exclude, policy=None, default_operations=None))
        policy.cache["matching"] = cached
    return cached


def may_match_namespace(policy: Policy, namespace: str | None) -> bool:
    """A cheap, conservative pre-check of ``match.namespaces``: False only when ``selects``
    would certainly refuse the policy for objects in ``namespace``."""
    patterns = (policy.spec.get("match") or {}).get("namespaces")
    if patterns is None:
        return True
    if namespace is None:
        return False
    return namespace in patterns or any(c in p for p in patterns for c in "*?[")


class CandidateIndex:
    """The policies of a set that can match objects of one kind in one namespace, in run order.

    ``PolicySet`` indexes by kind; with many per-team policies most candidates of a kind name
    other namespaces, so this second level (filled lazily, bounded) keeps the cost of an
    admission close to the number of policies that can really apply.
    """

    MAX_ENTRIES = 4096

    def __init__(self, by_kind: Mapping[tuple[str, str], tuple[Policy, ...]]) -> None:
        self._by_kind = by_kind  # PolicySet.by_kind; not the set, which memoises this index
        self._cache: dict[tuple[str, str, str | None], tuple[Policy, ...]] = {}

    def candidates(self, target: Target, namespace: str | None) -> tuple[Policy, ...]:
        key = (target.group, target.kind, namespace)
        hit = self._cache.get(key)
        if hit is None:
            if len(self._cache) >= self.MAX_ENTRIES:
                self._cache.clear()
            by_kind = self._by_kind.get((target.group, target.kind), ())
            hit = tuple(p for p in by_kind if may_match_namespace(p, namespace))
            self._cache[key] = hit
        return hit


def index_for(policies: PolicySet) -> CandidateIndex:
    """The memoised ``CandidateIndex`` of a policy set (kept in the set: a reload builds a
    new set, and the old index goes away with the old set)."""
    index: CandidateIndex | None = policies.cache.get("matching.index")
    if index is None:
        index = policies.cache["matching.index"] = CandidateIndex(policies.by_kind)
    return index


def compile_criteria(
    criteria: Mapping[str, Any],
    *,
    policy: Policy | None = None,
    default_operations: Sequence[str] | None = None,
) -> list[Predicate]:
    """The predicates of one ``match``/``exclude`` block, cheapest first.

    ``policy`` supplies the kinds already resolved by the loader (``Policy.targets``);
    ``namespaceSelector`` comes last so that "undecided" only means it alone was unknown.
    """
    preds: list[Predicate] = []
    kinds = criteria.get("kinds")
    if policy is not None and policy.targets is not None:
        preds.append(_targets_pred(policy.targets, kinds or []))
    elif kinds:
        preds.append(_kinds_pred(kinds))
    operations = criteria.get("operations") or default_operations
    if operations:
        preds.append(_operations_pred(operations))
    builders: list[tuple[str, Callable[[Any], Predicate]]] = [
        ("namespaces", _namespaces_pred),
        ("excludeNamespaces", _exclude_namespaces_pred),
        ("names", _names_pred),
        ("selector", lambda sel: _selector_pred(sel, "selector", lambda s: s.labels)),
        ("podSelector", lambda sel: _selector_pred(sel, "podSelector", lambda s: s.pod_labels)),
        ("annotations", _annotations_pred),
        ("namespaceSelector", _namespace_selector_pred),
    ]
    for key, build in builders:
        value = criteria.get(key)
        if value is not None:
            preds.append(build(value))
    return preds


def _targets_pred(targets: frozenset[Target], kinds: Sequence[str]) -> Predicate:
    wanted = frozenset((t.group, t.kind) for t in targets)

    def pred(s: Subject) -> _Miss | None:
        if (s.target.group, s.target.kind) in wanted:
            return None
        return _Miss(lambda: f"kind {s.target.describe()} is not in match.kinds {_show(kinds)}")

    return pred


def _kinds_pred(kinds: Sequence[str]) -> Predicate:
    def pred(s: Subject) -> _Miss | None:
        if any(refers_to(ref, s.target) for ref in kinds):
            return None
        return _Miss(lambda: f"kind {s.target.describe()} is not in kinds {_show(kinds)}")

    return pred


def _operations_pred(operations: Sequence[str]) -> Predicate:
    allowed = frozenset(operations)

    def pred(s: Subject) -> _Miss | None:
        return None if s.operation in allowed else _Miss(lambda: f"operation {s.operation} is not in {_show(operations)}")

    return pred


def _globs(patterns: Sequence[str]) -> Callable[[str], bool]:
    """Whether a value matches one of ``patterns``, as ``fnmatchcase`` says. The patterns with
    wildcards are compiled once, into one regular expression: the alternation of what
    ``fnmatch.translate`` makes of each, as ``fnmatchcase`` compiles it (joining them with ``|``
    is a use the fnmatch module keeps working). Matching it is several times cheaper than asking
    ``fnmatchcase`` pattern by pattern."""
    exact = frozenset(p for p in patterns if not any(c in p for c in "*?["))
    wild = [translate(p) for p in patterns if p not in exact]
    if not wild:
        return lambda value: value in exact
    match = re.compile("|".join(wild)).match
    return lambda value: value in exact or match(value) is not None


def _namespaces_pred(patterns: Sequence[str]) -> Predicate:
    hit = _globs(patterns)

    def pred(s: Subject) -> _Miss | None:
        if s.namespace is None:
            return _Miss(lambda: f"the object has no namespace; namespaces {_show(patterns)} is set")
        return None if hit(s.namespace) else _Miss(lambda: f"namespace {s.namespace} is not in {_show(patterns)}")

    return pred


def _exclude_namespaces_pred(patterns: Sequence[str]) -> Predicate:
    hit = _globs(patterns)

    def pred(s: Subject) -> _Miss | None:
        if s.namespace is not None and hit(s.namespace):
            return _Miss(lambda: f"namespace {s.namespace} is in excludeNamespaces {_show(patterns)}")
        return None

    return pred


def _names_pred(patterns: Sequence[str]) -> Predicate:
    hit = _globs(patterns)

    def pred(s: Subject) -> _Miss | None:
        return None if hit(s.name) else _Miss(lambda: f"name {s.name or '(none)'} is not in {_show(patterns)}")

    return pred


def _annotations_pred(wanted: Mapping[str, str]) -> Predicate:
    items = tuple(wanted.items())

    def pred(s: Subject) -> _Miss | None:
        for key, pattern in items:
            value = s.annotations.get(key)
            if value is None:
                return _Miss(_const(f"annotation {key} is not set"))
            if not fnmatchcase(str(value), pattern):
                return _Miss(_const(f"annotation {key}={value} does not match {pattern!r}"))
        return None

    return pred


def _selector_pred(selector: Mapping[str, Any], field: str, labels_of: Callable[[Subject], Mapping[str, Any]]) -> Predicate:
    def pred(s: Subject) -> _Miss | None:
        labels = labels_of(s)
        if selectors.matches(selector, labels):
            return None
        return _Miss(lambda: f"{field}: {selectors.mismatch(selector, labels)}")

    return pred


def _namespace_selector_pred(selector: Mapping[str, Any]) -> Predicate:
    def pred(s: Subject) -> _Miss | None:
        if s.namespace is None:
            return _Miss(lambda: "namespaceSelector: the object has no namespace")
        if s.cluster is None:
            return _Miss(lambda: "namespaceSelector needs namespace labels; no cluster view is configured", True)
        labels = s.cluster.namespace_labels(s.namespace)
        if labels is None:
            return _Miss(lambda: f"namespaceSelector: namespace {s.namespace} is unknown to the cluster view", True)
        if selectors.matches(selector, labels):
            return None
        return _Miss(lambda: f"namespaceSelector: namespace {s.namespace}: {selectors.mismatch(selector, labels)}")

    return pred


def _show(values: Sequence[Any]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"
