"""Can two policies select the same object? Can one select anything at all?

Used by ``lint``. The answers are deliberately conservative: "may overlap" unless the
match criteria provably exclude each other (kinds, operations, namespace and name globs,
contradictory label selectors, annotation globs), so a reported conflict is a real one.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.kube.kinds import Target, Targets
from webhook.kube.selectors import conflict
from webhook.policy.policyset import Policy

__all__ = [
    "DEFAULT_OPERATIONS",
    "can_overlap",
    "effective_kinds",
    "effective_operations",
    "globs_overlap",
    "selector_satisfiable",
    "selectors_compatible",
    "uncovered_globs",
]

DEFAULT_OPERATIONS = frozenset({"CREATE", "UPDATE"})
_WILD = set("*?[")

Spec = Mapping[str, Any]


def _block(spec: Spec, name: str) -> Mapping[str, Any]:
    value = spec.get(name)
    return value if isinstance(value, Mapping) else {}


def _only(exclude: Mapping[str, Any], criterion: str) -> Any:
    """The value of an exclude criterion when it is the exclude's only one.

    An exclude with several criteria ANDs them, so on its own any one of them says
    nothing certain about what is excluded; we only reason about single-criterion ones.
    """
    return exclude.get(criterion) if set(exclude) == {criterion} else None


def effective_kinds(policy: Policy, targets: Targets) -> frozenset[Target]:
    """Kinds the policy can select: ``match.kinds`` (or all) minus a kinds-only exclude."""
    kinds = policy.targets if policy.targets is not None else frozenset(targets)
    excluded = _only(_block(policy.spec, "exclude"), "kinds") or ()
    return kinds - {t for ref in excluded for t in targets.resolve(ref)}


def effective_operations(policy: Policy) -> frozenset[str]:
    """Operations the policy can select, minus an operations-only exclude."""
    ops = frozenset(_block(policy.spec, "match").get("operations") or DEFAULT_OPERATIONS)
    return ops - set(_only(_block(policy.spec, "exclude"), "operations") or ())


def _is_literal(glob: str) -> bool:
    return not (_WILD & set(glob))


def _fixed_ends(glob: str) -> tuple[str, str]:
    """The literal text before the first and after the last wildcard."""
    first = min(glob.index(c) for c in _WILD if c in glob)
    last = max(glob.rindex(c) for c in _WILD if c in glob)
    tail = glob[last + 1 :] if glob[last] != "[" else ""
    return glob[:first], tail


def globs_overlap(a: str, b: str) -> bool:
    """Whether some string could match both fnmatch globs (conservatively True)."""
    if _is_literal(a) and _is_literal(b):
        return a == b
    if _is_literal(a) or _is_literal(b):
        literal, glob = (a, b) if _is_literal(a) else (b, a)
        return fnmatch.fnmatchcase(literal, glob)
    (pa, sa), (pb, sb) = _fixed_ends(a), _fixed_ends(b)
    return (pa.startswith(pb) or pb.startswith(pa)) and (sa.endswith(sb) or sb.endswith(sa))


def _covers(exclude: str, glob: str) -> bool:
    """Whether every string matching ``glob`` also matches ``exclude``."""
    if set(exclude) == {"*"} or exclude == glob:
        return True
    return _is_literal(glob) and fnmatch.fnmatchcase(glob, exclude)


def uncovered_globs(globs: Sequence[str] | None, excluded: Iterable[str]) -> list[str]:
    """The globs (``None``: any) that some name can match without being excluded."""
    wanted = list(globs) if globs else ["*"]
    ex = list(excluded)
    return [g for g in wanted if not any(_covers(e, g) for e in ex)]


def _names(spec: Spec, match_key: str, exclude_key: str | None) -> tuple[list[str], list[str]]:
    match, exclude = _block(spec, "match"), _block(spec, "exclude")
    excluded = list(match.get(exclude_key) or ()) if exclude_key else []
    excluded += list(_only(exclude, match_key) or ())
    return uncovered_globs(match.get(match_key), excluded), excluded


def _globs_meet(a: Spec, b: Spec, match_key: str, exclude_key: str | None) -> bool:
    globs_a, ex_a = _names(a, match_key, exclude_key)
    globs_b, ex_b = _names(b, match_key, exclude_key)
    for ga in globs_a:
        for gb in globs_b:
            if not globs_overlap(ga, gb):
                continue
            # A literal name both select must not be excluded by the other policy.
            literal = ga if _is_literal(ga) else gb if _is_literal(gb) else None
            if literal is None or not any(_covers(e, literal) for e in ex_a + ex_b):
                return True
    return False


def _requirements(selector: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """A selector's requirements, ``matchLabels {k: v}`` being ``k In [v]``."""
    if not selector:
        return []
    reqs: list[Mapping[str, Any]] = [{"key": k, "operator": "In", "values": [v]}
                                     for k, v in (selector.get("matchLabels") or {}).items()]
    return reqs + list(selector.get("matchExpressions") or ())


def selectors_compatible(*selectors: Mapping[str, Any] | None) -> bool:
    """Whether one label set could satisfy all the selectors at once (``kube.selectors.conflict``)."""
    return conflict(req for selector in selectors for req in _requirements(selector)) is None


def selector_satisfiable(selector: Mapping[str, Any] | None) -> bool:
    """Whether any label set satisfies the selector."""
    return selectors_compatible(selector)


def _annotations_compatible(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(globs_overlap(str(glob), str(b[key])) for key, glob in a.items() if key in b)


def can_overlap(a: Policy, b: Policy, *, targets: Targets) -> bool:
    """Whether some object and operation could be selected by both policies."""
    if not (effective_kinds(a, targets) & effective_kinds(b, targets)):
        return False
    if not (effective_operations(a) & effective_operations(b)):
        return False
    if not _globs_meet(a.spec, b.spec, "namespaces", "excludeNamespaces"):
        return False
    if not _globs_meet(a.spec, b.spec, "names", None):
        return False
    ma, mb = _block(a.spec, "match"), _block(b.spec, "match")
    for field in ("selector", "podSelector", "namespaceSelector"):
        if not selectors_compatible(ma.get(field), mb.get(field)):
            return False
    return _annotations_compatible(ma.get("annotations") or {}, mb.get("annotations") or {})
