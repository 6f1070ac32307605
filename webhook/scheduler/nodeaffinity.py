"""A pod's node selector and node affinity, as k8s.io/component-helpers/scheduling/corev1/nodeaffinity.

``RequiredNodeAffinity`` is ``GetRequiredNodeAffinity``: the ``nodeSelector`` map ANDed with
the required ``nodeSelectorTerms`` (ORed, a ``LazyErrorNodeSelector``: a term that failed to
parse never matches, and an empty term - no expressions, no fields - matches nothing).
``PreferredTerms`` is ``PreferredSchedulingTerms`` (weight-0 and empty terms dropped; a term
that fails to parse is an error of the whole list, as ``NewPreferredSchedulingTerms``).
``explain`` names the term and expression each node failed, which the scheduler only logs.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.kube.affinity import REQUIRED
from webhook.scheduler.labels import NodeRequirement, str_labels

__all__ = ["NodeSelectorTerm", "PreferredTerms", "RequiredNodeAffinity", "node_identity", "prefilter_node_names",
           "terms_match"]

_NAME_FIELD = "metadata.name"


class NodeSelectorTerm:
    """One ``NodeSelectorTerm``: expressions over labels ANDed with fields over the name."""

    __slots__ = ("errors", "exprs", "fields", "index")

    def __init__(self, term: Mapping[str, Any], index: int) -> None:
        self.index = index
        self.exprs = tuple(NodeRequirement(e, i) for i, e in enumerate(term.get("matchExpressions") or ()))
        self.fields = tuple(NodeRequirement(f, i, field=True) for i, f in enumerate(term.get("matchFields") or ()))
        self.errors = tuple(r.error for r in self.exprs + self.fields if r.error)

    @property
    def empty(self) -> bool:
        return not self.exprs and not self.fields

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        """``nodeSelectorTerm.match`` for a term without parse errors."""
        for req in self.exprs:
            if not req.matches(labels.get(req.key)):
                return False
        # matchFields are only checked when the node has fields (a name), and the only field
        # a node has is metadata.name: any other key reads as the empty string.
        if self.fields and name:
            for req in self.fields:
                if not req.matches(name if req.key == _NAME_FIELD else ""):
                    return False
        return True

    def explain(self, labels: Mapping[str, str], name: str) -> str | None:
        """The first expression or field this node fails, or None when the term matches."""
        where = f"nodeSelectorTerms[{self.index}]"
        if self.errors:
            return f"{where} is invalid and matches no node: {'; '.join(self.errors)}"
        for req in self.exprs:
            value = labels.get(req.key)
            if not req.matches(value):
                found = f"{req.key}={value}" if value is not None else f"no label {req.key}"
                return f"{where}.matchExpressions[{req.index}] {req.describe()} (node has {found})"
        for req in self.fields if name else ():
            if not req.matches(name if req.key == _NAME_FIELD else ""):
                return f"{where}.matchFields[{req.index}] {req.describe()} (node is {name})"
        return None


def _terms(raw: Sequence[Mapping[str, Any]]) -> tuple[NodeSelectorTerm, ...]:
    return tuple(NodeSelectorTerm(t or {}, i) for i, t in enumerate(raw))


def node_identity(node: Mapping[str, Any]) -> tuple[dict[str, str], str]:
    """What node affinity reads of a Node object: its labels and its name (the one field)."""
    meta = node.get("metadata") or {}
    return str_labels(meta.get("labels")), str(meta.get("name") or "")


def terms_match(terms: Sequence[Mapping[str, Any]] | None, node: Mapping[str, Any]) -> bool:
    """Required ``nodeSelectorTerms`` (ORed; None: no required affinity) against a Node object."""
    if terms is None:
        return True
    return RequiredNodeAffinity((), _terms(terms)).matches(*node_identity(node))


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """What a node must satisfy: the ``nodeSelector`` and the required terms (None: no terms field)."""

    node_selector: tuple[tuple[str, str], ...]
    terms: tuple[NodeSelectorTerm, ...] | None

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> RequiredNodeAffinity:
        selector = tuple((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items())
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
        terms = None if required is None else _terms(required.get("nodeSelectorTerms") or ())
        return cls(selector, terms)

    @property
    def trivial(self) -> bool:
        """No nodeSelector and no required affinity: the NodeAffinity filter is skipped."""
        return not self.node_selector and self.terms is None

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        """``RequiredNodeAffinity.Match`` (parse errors ignored, as every caller does)."""
        for key, value in self.node_selector:
            if labels.get(key) != value:
                return False
        if self.terms is None:
            return True
        for term in self.terms:
            if not term.empty and not term.errors and term.matches(labels, name):
                return True
        return False

    def explain(self, labels: Mapping[str, str], name: str) -> tuple[str, ...]:
        """Every reason this node fails: each nodeSelector entry, then each term's first miss."""
        reasons = [
            f"nodeSelector {key}={value} (node has {key}={labels[key]})" if key in labels
            else f"nodeSelector {key}={value} (node has no label {key})"
            for key, value in self.node_selector if labels.get(key) != value
        ]
        if self.terms is not None and not self.matches_terms(labels, name):
            if not self.terms:
                reasons.append("requiredDuringSchedulingIgnoredDuringExecution has no nodeSelectorTerms")
            for term in self.terms:
                why = f"nodeSelectorTerms[{term.index}] is empty and matches no node" if term.empty \
                    else term.explain(labels, name)
                if why:
                    reasons.append(why)
        return tuple(reasons)

    def matches_terms(self, labels: Mapping[str, str], name: str) -> bool:
        return self.terms is None or any(
            not t.empty and not t.errors and t.matches(labels, name) for t in self.terms)


class PreferredTerms:
    """``PreferredSchedulingTerms``: ``score(node)`` sums the weights of the matching terms."""

    __slots__ = ("terms",)

    def __init__(self, raw: Sequence[Mapping[str, Any]]) -> None:
        kept: list[tuple[int, NodeSelectorTerm]] = []
        for i, item in enumerate(raw):
            term = NodeSelectorTerm(item.get("preference") or {}, i)
            weight = int(item.get("weight") or 0)
            if weight == 0 or term.empty:
                continue
            if term.errors:
                raise ValueError(f"preferredDuringSchedulingIgnoredDuringExecution[{i}]: {'; '.join(term.errors)}")
            kept.append((weight, term))
        self.terms = tuple(kept)

    def score(self, labels: Mapping[str, str], name: str) -> int:
        return sum(weight for weight, term in self.terms if term.matches(labels, name))


def prefilter_node_names(spec: Mapping[str, Any]) -> frozenset[str] | None:
    """NodeAffinity ``PreFilter``'s ``PreFilterResult``: when every required term names nodes
    with ``metadata.name In``, only those nodes are filtered at all (None: every node).
    An empty result means the terms conflict ("pod affinity terms conflict")."""
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    terms = (required or {}).get("nodeSelectorTerms") or ()
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for req in (term or {}).get("matchFields") or ():
            if req.get("key") == _NAME_FIELD and req.get("operator") == "In":
                values = {str(v) for v in req.get("values") or ()}
                # The requirements of a term are ANDed: intersect the names they allow.
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None  # this term does not pin names, and terms are ORed
        names |= term_names
    return frozenset(names)
