"""Node selector terms as an algebra: identity, AND, negation, and whether a term can match.

Required node affinity is in disjunctive normal form: ``nodeSelectorTerms`` are ORed and each
term ANDs its ``matchExpressions`` and ``matchFields`` (``nodeSelectorTerm.match`` in
k8s.io/component-helpers/scheduling/corev1/nodeaffinity). A list of terms here means that OR.

Admission writes node affinity with these functions (``engine.fragments`` compiles a policy's
nodeAffinity and nodeAntiAffinity) and ``explain`` reads a Wukong VM's native
``nodeAntiAffinity`` with the very same ones, so the node set one writes is the node set the
other simulates.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.kube import selectors
from webhook.kube.nodes import INT64_MAX, label_int

__all__ = ["NodeTermError", "Term", "TermKey", "and_terms", "conjoin", "dedupe", "expr_key", "key_contains", "negate",
           "negate_preferred", "negate_term", "preferred_key", "term_contains", "term_contradiction", "term_key"]

Term = dict[str, Any]
TermKey = tuple[frozenset[Any], frozenset[Any]]  # the requirements of matchExpressions, of matchFields
_PARTS = ("matchExpressions", "matchFields")


class NodeTermError(ValueError):
    """A term that has no negation as terms: a requirement the scheduler would refuse, or a
    preferred term whose negation is an OR."""


# --- identity: requirements compared as sets ----------------------------------------------


def expr_key(expr: Mapping[str, Any]) -> tuple[Any, ...]:
    """Identity of a requirement: the order of its values does not matter (they are a set)."""
    return (expr.get("key"), expr.get("operator"), tuple(sorted(map(str, expr.get("values") or ()))))


def term_key(term: Mapping[str, Any]) -> TermKey:
    """Identity of a NodeSelectorTerm: its requirements are ANDed, so order is irrelevant."""
    return _requirements(term.get("matchExpressions")), _requirements(term.get("matchFields"))


_NO_REQUIREMENTS: frozenset[Any] = frozenset()


def _requirements(exprs: Iterable[Mapping[str, Any]] | None) -> frozenset[Any]:
    return frozenset(map(expr_key, exprs)) if exprs else _NO_REQUIREMENTS


def preferred_key(pref: Mapping[str, Any]) -> tuple[Any, ...]:
    """Identity of a PreferredSchedulingTerm: its weight and its term."""
    return (pref.get("weight"), term_key(pref.get("preference") or {}))


def term_contains(term: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether ``term`` already requires everything ``other`` requires (so it implies it)."""
    return key_contains(term_key(term), term_key(other))


def key_contains(key: TermKey, other: TermKey) -> bool:
    """``term_contains`` for the terms keyed ``key`` and ``other``."""
    return other[0] <= key[0] and other[1] <= key[1]


def dedupe(items: Iterable[Term], key: Any) -> list[Term]:
    """The items in order, each ``key`` once (the first item with it)."""
    seen: set[Any] = set()
    out: list[Term] = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out


# --- whether a term can match any node ---------------------------------------------------


def term_contradiction(term: Mapping[str, Any]) -> str | None:
    """Why a NodeSelectorTerm can match no node, or None when some node could satisfy it
    (what lint and the engine report).

    The term's requirements are ANDed: over the node's labels (``matchExpressions``) and over
    its fields (``matchFields``, the node's name), each a set of requirements that must hold
    together (``selectors.conflict``). An empty term matches no node.
    """
    exprs = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not exprs and not fields:
        return "the term is empty"
    return (selectors.conflict(exprs) if exprs else None) or (selectors.conflict(fields) if fields else None)


# --- AND ---------------------------------------------------------------------------------


def conjoin(
    term: Mapping[str, Any], other: Mapping[str, Any], *, key: TermKey | None = None, other_key: TermKey | None = None
) -> Term:
    """``term AND other`` as a new term: ``term``'s requirements first, in its order, then the
    ones ``other`` adds. Keys the term carries besides the two lists are kept. The new term
    shares the requirements of both: no one edits a requirement in place (the engine builds a
    new one), so a policy's compiled requirements can go into every object it places.
    ``key`` is ``term_key(term)`` and ``other_key`` ``term_key(other)``, when the caller has
    them already: when the two share no requirement, every one of ``other``'s is added
    without keying each."""
    result = dict(term)
    have_keys = key or term_key(term)
    for i, part in enumerate(_PARTS):
        requirements = other.get(part)
        if not requirements:
            continue
        have = have_keys[i]
        if other_key is not None and have.isdisjoint(other_key[i]):
            extra = list(requirements)
        else:
            extra = [e for e in requirements if expr_key(e) not in have]
        if extra:
            result[part] = [*(result.get(part) or ()), *extra]
    return result


def and_terms(terms: Sequence[Mapping[str, Any]], others: Sequence[Mapping[str, Any]]) -> list[Term]:
    """``(OR of terms) AND (OR of others)`` as one OR of terms: every pair conjoined (the
    cross product, AND distributing over OR), each distinct term once. A term that can match
    no node (``term_contradiction``) is kept: dropping it changes no node set, and
    is the caller's choice."""
    return dedupe((conjoin(a, b) for a, b in itertools.product(terms, others)), term_key)


# --- negation (nodeAntiAffinity) -----------------------------------------------------------

_OPPOSITE = {"In": "NotIn", "NotIn": "In", "Exists": "DoesNotExist", "DoesNotExist": "Exists"}


def negate(expr: Mapping[str, Any], *, field: bool = False) -> list[Term] | None:
    """The requirements whose OR is ``NOT expr``, or None when ``expr`` matches no node at
    all (so its negation admits every node and constrains nothing); ``field``: a requirement
    of ``matchFields``.

    NotIn and DoesNotExist already match nodes without the key, so In/NotIn and
    Exists/DoesNotExist are exact opposites. ``Gt v`` is false on a node lacking the key, so
    its negation admits those nodes too: ``Lt v+1`` OR ``DoesNotExist``; ``Lt v`` becomes
    ``Gt v-1`` OR ``DoesNotExist``. The integers a node label can hold are 0 .. 2^63-1
    (``kube.nodes.label_int``), so ``Gt`` 2^63-1 and ``Lt 0`` match no node, and writing
    their negation as ``Lt 2^63`` or ``Gt -1`` would give terms the scheduler cannot parse
    (a parse error makes a required term match nothing). Over nodes whose label is absent
    or an integer the negation is exact; a label value that is not an integer satisfies
    neither Gt nor Lt, and no requirement can express "not an integer". Fields always
    exist on a node.

    A requirement the scheduler refuses (``kube.selectors.requirement_error``) matches no
    node, and its opposite would be refused as well: ``NodeTermError`` says which.
    """
    op = str(expr.get("operator"))
    key = expr.get("key")
    values = [str(v) for v in expr.get("values") or ()]
    error = selectors.field_requirement_error(op, values) if field \
        else selectors.requirement_error(str(key), op, values, node=True)
    if error:
        raise NodeTermError(f"cannot negate {key} {op} {values}: {error}")
    if op in _OPPOSITE:
        out: Term = {"key": key, "operator": _OPPOSITE[op]}
        if op in ("In", "NotIn"):
            out["values"] = values
        return [out]
    bound = label_int(values[0])
    if bound is None:  # requirement_error refused what label_int refuses; said again for the reader
        raise NodeTermError(f"{op} needs one integer value from 0 to {INT64_MAX}, not {values}")
    if (op == "Gt" and bound == INT64_MAX) or (op == "Lt" and bound == 0):
        return None
    flipped = [str(bound + 1)] if op == "Gt" else [str(bound - 1)]
    return [{"key": key, "operator": "Lt" if op == "Gt" else "Gt", "values": flipped},
            {"key": key, "operator": "DoesNotExist"}]


def negate_term(term: Mapping[str, Any]) -> list[Term] | None:
    """``NOT (e1 AND e2 ...)`` = ``NOT e1 OR NOT e2 ...``: one single-requirement term each;
    None when the term matches no node, so that its negation constrains nothing. An empty
    term also matches no node: its negation is no term at all."""
    out: list[Term] = []
    for part in _PARTS:
        for requirement in term.get(part) or ():
            negated = negate(requirement, field=part == "matchFields")
            if negated is None:
                return None
            out.extend({part: [n]} for n in negated)
    return out


def negate_preferred(pref: Mapping[str, Any]) -> list[Term]:
    """A preferred anti term (exactly one requirement) as preferred affinity terms.

    A preferred term is one AND, so the OR that negates Gt/Lt (``Lt v+1`` OR
    ``DoesNotExist``) cannot be one term. It becomes two terms of the same weight: the two
    are mutually exclusive (a node has the key or not), so every node scores exactly the
    weight the single faithful term would give it. Avoiding ``A AND B`` is preferring
    ``NOT A OR NOT B``, which weighted terms cannot express (a node satisfying both would
    score twice): ``NodeTermError``. A term that matches no node (an empty one, ``Gt``
    2^63-1) scores every node alike, so its negation adds nothing.
    """
    preference = pref.get("preference") or {}
    count = sum(len(preference.get(part) or ()) for part in _PARTS)
    if count > 1:
        raise NodeTermError(f"a preferred anti term with {count} requirements: its negation is an OR, "
                            "which one preferred term cannot express")
    weight = pref.get("weight")
    return [{"weight": weight, "preference": t} for t in negate_term(preference) or ()]

