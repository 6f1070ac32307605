"""Does a policy select an object? Pure predicates over a ``Subject`` (SPEC 3, match/exclude).

Each criterion of a ``match`` or ``exclude`` block becomes one small predicate that
returns ``None`` when it holds and a human reason when it does not; an unset criterion
is not compiled at all, so it matches. The predicates of a policy are built once and
memoised on the policy. Globs are ``fnmatch`` style and case-sensitive.

Decisions where Kubernetes offers no rule:
- ``match.operations`` defaults to CREATE and UPDATE; ``exclude.operations`` to any.
- An object without a namespace (cluster-scoped kinds from a kinds config) never matches
  ``namespaces`` or ``namespaceSelector`` and is never removed by ``excludeNamespaces``.
- ``namespaceSelector`` needs namespace labels from the cluster view (SPEC 4.4). Without
  one, or for a namespace it does not know, the criterion does not hold and the verdict is
  marked ``undecided`` so admission can say why the policy was left out.
- An ``exclude`` block with no criteria excludes nothing.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, NamedTuple

from webhook.policyset import Policy
from webhook.targets import Target, get_path

if TYPE_CHECKING:  # the cluster view is only consulted through its protocol
    from webhook.cluster import ClusterView

DEFAULT_OPERATIONS = ("CREATE", "UPDATE")
_NO_LABELS: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class Subject:
    """What matching looks at: the object's identity, labels and request context."""

    target: Target
    operation: str
    namespace: str | None
    name: str  # metadata.name, else metadata.generateName, else ""
    labels: Mapping[str, Any]
    annotations: Mapping[str, Any]
    pod_labels: Mapping[str, Any]
    cluster: ClusterView | None = None


class Verdict(NamedTuple):
    """A decision and the reason for it; ``undecided`` when it needed an unknown cluster fact."""

    matched: bool
    reason: str
    undecided: bool = False


class _Miss(NamedTuple):
    reason: str
    undecided: bool = False


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
        namespace=namespace or meta.get("namespace") or None,
        name=str(meta.get("name") or meta.get("generateName") or ""),
        labels=_mapping(meta.get("labels")),
        annotations=_mapping(meta.get("annotations")),
        pod_labels=_mapping(get_path(obj, target.pod_labels)),
        cluster=cluster,
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else _NO_LABELS


def selects(policy: Policy, subj: Subject) -> Verdict:
    """Whether ``policy`` applies: its ``match`` holds and its ``exclude`` does not."""
    match_preds, exclude_preds = _compiled(policy)
    for pred in match_preds:
        miss = pred(subj)
        if miss is not None:
            return Verdict(False, miss.reason, miss.undecided)
    if not exclude_preds:
        return Verdict(True, "matched")
    for pred in exclude_preds:
        miss = pred(subj)
        if miss is not None:
            return Verdict(True, f"matched (not excluded: {miss.reason})", miss.undecided)
    return Verdict(False, "excluded: every exclude criterion holds")


def _compiled(policy: Policy) -> tuple[list[Predicate], list[Predicate]]:
    cached = policy.cache.get("matching")
    if cached is None:
        match = policy.spec.get("match") or {}
        exclude = policy.spec.get("exclude") or {}
        match_preds = compile_criteria(match, policy=policy, default_operations=DEFAULT_OPERATIONS)
        cached = (match_preds, compile_criteria(exclude, policy=None, default_operations=None))
        policy.cache["matching"] = cached
    return cached


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


def kind_ref_matches(ref: str, target: Target) -> bool:
    """Whether a kinds entry (``Kind``, ``group/Kind``, ``version/Kind``, ``group/version/Kind``)
    names ``target``. Versions of one group/kind are the same resource, as in ``Targets.resolve``."""
    parts = ref.split("/")
    if parts[-1] != target.kind:
        return False
    if len(parts) == 1:
        return True
    if len(parts) == 2:
        return parts[0] == target.group or (target.group == "" and parts[0] == target.version)
    return len(parts) == 3 and parts[0] == target.group


def _targets_pred(targets: frozenset[Target], kinds: Sequence[str]) -> Predicate:
    def pred(s: Subject) -> _Miss | None:
        if s.target in targets:
            return None
        return _Miss(f"kind {s.target.describe()} is not in match.kinds {_show(kinds)}")

    return pred


def _kinds_pred(kinds: Sequence[str]) -> Predicate:
    def pred(s: Subject) -> _Miss | None:
        if any(kind_ref_matches(ref, s.target) for ref in kinds):
            return None
        return _Miss(f"kind {s.target.describe()} is not in kinds {_show(kinds)}")

    return pred


def _operations_pred(operations: Sequence[str]) -> Predicate:
    allowed = frozenset(operations)

    def pred(s: Subject) -> _Miss | None:
        return None if s.operation in allowed else _Miss(f"operation {s.operation} is not in {_show(operations)}")

    return pred


def _globs(patterns: Sequence[str]) -> Callable[[str], bool]:
    exact = frozenset(p for p in patterns if not any(c in p for c in "*?["))
    wild = tuple(p for p in patterns if p not in exact)
    return lambda value: value in exact or any(fnmatchcase(value, p) for p in wild)


def _namespaces_pred(patterns: Sequence[str]) -> Predicate:
    hit = _globs(patterns)

    def pred(s: Subject) -> _Miss | None:
        if s.namespace is None:
            return _Miss(f"the object has no namespace; namespaces {_show(patterns)} is set")
        return None if hit(s.namespace) else _Miss(f"namespace {s.namespace} is not in {_show(patterns)}")

    return pred


def _exclude_namespaces_pred(patterns: Sequence[str]) -> Predicate:
    hit = _globs(patterns)

    def pred(s: Subject) -> _Miss | None:
        if s.namespace is not None and hit(s.namespace):
            return _Miss(f"namespace {s.namespace} is in excludeNamespaces {_show(patterns)}")
        return None

    return pred


def _names_pred(patterns: Sequence[str]) -> Predicate:
    hit = _globs(patterns)

    def pred(s: Subject) -> _Miss | None:
        return None if hit(s.name) else _Miss(f"name {s.name or '(none)'} is not in {_show(patterns)}")

    return pred


def _annotations_pred(wanted: Mapping[str, str]) -> Predicate:
    items = tuple(wanted.items())

    def pred(s: Subject) -> _Miss | None:
        for key, pattern in items:
            value = s.annotations.get(key)
            if value is None:
                return _Miss(f"annotation {key} is not set")
            if not fnmatchcase(str(value), pattern):
                return _Miss(f"annotation {key}={value} does not match {pattern!r}")
        return None

    return pred


def _selector_pred(selector: Mapping[str, Any], field: str, labels_of: Callable[[Subject], Mapping[str, Any]]) -> Predicate:
    def pred(s: Subject) -> _Miss | None:
        why = selector_mismatch(selector, labels_of(s))
        return None if why is None else _Miss(f"{field}: {why}")

    return pred


def _namespace_selector_pred(selector: Mapping[str, Any]) -> Predicate:
    def pred(s: Subject) -> _Miss | None:
        if s.namespace is None:
            return _Miss("namespaceSelector: the object has no namespace")
        if s.cluster is None:
            return _Miss("namespaceSelector needs namespace labels; no cluster view is configured", True)
        labels = s.cluster.namespace_labels(s.namespace)
        if labels is None:
            return _Miss(f"namespaceSelector: namespace {s.namespace} is unknown to the cluster view", True)
        why = selector_mismatch(selector, labels)
        return None if why is None else _Miss(f"namespaceSelector: namespace {s.namespace}: {why}")

    return pred


def selector_mismatch(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> str | None:
    """Why ``labels`` fail a Kubernetes LabelSelector, or None when they satisfy it.

    Kubernetes semantics: matchLabels and matchExpressions are ANDed; an empty selector
    selects everything; ``NotIn`` and ``DoesNotExist`` hold when the key is absent.
    """
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return f"label {key}={value} required, found {_label(labels, key)}"
    for expr in selector.get("matchExpressions") or ():
        why = _expression_mismatch(expr, labels)
        if why is not None:
            return why
    return None


def _expression_mismatch(expr: Mapping[str, Any], labels: Mapping[str, Any]) -> str | None:
    key, op = expr.get("key", ""), expr.get("operator", "")
    values = expr.get("values") or ()
    present = key in labels
    if op == "In":
        ok = present and labels[key] in values
    elif op == "NotIn":
        ok = not present or labels[key] not in values
    elif op == "Exists":
        ok = present
    elif op == "DoesNotExist":
        ok = not present
    else:
        return f"unknown operator {op!r} for label {key}"
    if ok:
        return None
    return f"label {key} {op} {_show(values)} does not hold (found {_label(labels, key)})".replace(" []", "")


def _label(labels: Mapping[str, Any], key: str) -> str:
    return f"{key}={labels[key]}" if key in labels else "no such label"


def _show(values: Sequence[Any]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"
