"""A policy's placement compiled to concrete Kubernetes fragments.

Everything here depends on the policy alone, so ``compiled(policy)`` computes it once and
memoises it in ``policy.cache``. The fragments are shared between objects: the containers
that hold them (a list of terms, a node selector) are each object's own, the entries (a term,
a toleration, a preference) go into every object as they are, since no one edits a list entry
in place (``engine.working``).

Required node affinity is kept in disjunctive normal form: a list of NodeSelectorTerms that
are ORed, each an AND of expressions, exactly the shape of ``nodeSelectorTerms``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.kube import nodeterms, resourcelabels
from webhook.kube.capacity import capacity_requirement, provider
from webhook.kube.nodeterms import Term, TermKey, conjoin, dedupe, preferred_key, term_contradiction, term_key
from webhook.kube.objects import copy_json
from webhook.kube.quantity import QuantityError
from webhook.policy.policyset import Policy

MAX_TERMS = 64  # more ANDed terms than this is an error for that object (docs/policies.md)
CACHE_KEY = "engine.compiled"


class CompileError(ValueError):
    """The policy cannot be compiled (the engine reports it per object)."""


def and_dnf(groups: Sequence[Sequence[Term]]) -> list[Term]:
    """AND of several ORs of terms, as one OR of terms (``nodeterms.and_terms``), without the
    terms that can match no node; a CompileError when none is left or more than MAX_TERMS."""
    result: list[Term] = [{}]
    for group in groups:
        anded = [t for t in nodeterms.and_terms(result, group) if term_contradiction(t) is None]
        if not anded:
            why = term_contradiction(conjoin(result[0], group[0])) if group else "no term"
            raise CompileError(f"required node affinity contradicts itself and can match no node: {why}")
        if len(anded) > MAX_TERMS:
            raise CompileError(f"required node affinity needs more than {MAX_TERMS} terms")
        result = anded
    return result


def _negated(negate: Callable[[Mapping[str, Any]], Any], term: Mapping[str, Any]) -> Any:
    """``nodeterms.negate_term`` or ``negate_preferred``, their refusal a CompileError."""
    try:
        return negate(term)
    except nodeterms.NodeTermError as exc:
        raise CompileError(str(exc)) from exc


def _resource_required(resources: Mapping[str, Any]) -> list[Term]:
    try:
        return resourcelabels.resource_required(resources)
    except QuantityError as exc:
        raise CompileError(str(exc)) from exc


# --- the compiled policy --------------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    """Self anti-affinity: replicas on distinct topology domains (``podAntiAffinity.spread``)."""

    mode: str  # required | preferred
    topology_key: str
    weight: int
    label_selector: Mapping[str, Any] | None  # None: the workload selector
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Compiled:
    """Everything one policy contributes, independent of any object."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    required: list[Term] | None = None  # DNF to AND into the object; None: nothing required
    required_keys: tuple[TermKey, ...] = ()  # ``term_key`` of each required term, keyed once
    preferred: list[Term] = field(default_factory=list)  # PreferredSchedulingTerms
    spread: Spread | None = None
    anti_required: list[Term] = field(default_factory=list)  # PodAffinityTerms
    anti_preferred: list[Term] = field(default_factory=list)  # WeightedPodAffinityTerms
    affinity_required: list[Term] = field(default_factory=list)
    affinity_preferred: list[Term] = field(default_factory=list)
    tolerations: list[Term] = field(default_factory=list)
    scheduling: Mapping[str, str] = field(default_factory=dict)
    rollout: Mapping[str, Any] | None = None
    eviction: str | None = None
    error: str | None = None  # the policy cannot be applied to any object


def compiled(policy: Policy) -> Compiled:
    """The policy's fragments, computed once per policy."""
    cached = policy.cache.get(CACHE_KEY)
    if cached is None:
        try:
            cached = compile_spec(policy.spec)
        except CompileError as invalid:
            cached = Compiled(error=str(invalid))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # The loader validates policies; a spec built some other way that slipped past
            # it fails every object it matches (open, per object) instead of crashing.
            cached = Compiled(error=f"policy cannot be compiled: {type(exc).__name__}: {exc}")
        policy.cache[CACHE_KEY] = cached
    return cached  # type: ignore[no-any-return]


def compile_spec(spec: Mapping[str, Any]) -> Compiled:
    placement = spec.get("placement") or {}
    anti = placement.get("podAntiAffinity") or {}
    terms = anti.get("terms") or {}
    affinity = placement.get("podAffinity") or {}
    tolerations = [copy_json(t) for t in placement.get("tolerations") or ()]
    capacity = placement.get("capacity")
    if capacity and "spot" in (capacity.get("prefer"), capacity.get("require")):
        # Spot nodes that carry a taint need its toleration, or spot is never used.
        tol = provider(capacity).get("toleration")
        if tol:
            tolerations.append(copy_json(dict(tol)))
    vm = spec.get("vm") or {}
    required = _required(placement)
    return Compiled(
        node_selector={str(k): str(v) for k, v in (placement.get("nodeSelector") or {}).items()},
        required=required,
        required_keys=tuple(map(term_key, required or ())),
        preferred=_preferred(placement),
        spread=_spread(anti),
        anti_required=[copy_json(t) for t in terms.get("required") or ()],
        anti_preferred=[copy_json(t) for t in terms.get("preferred") or ()],
        affinity_required=[copy_json(t) for t in affinity.get("required") or ()],
        affinity_preferred=[copy_json(t) for t in affinity.get("preferred") or ()],
        tolerations=tolerations,
        scheduling={k: str(v) for k, v in (spec.get("scheduling") or {}).items() if v is not None},
        rollout=copy_json(spec.get("rollout")) if spec.get("rollout") else None,
        eviction=vm.get("evictionStrategy"),
    )


def _required(placement: Mapping[str, Any]) -> list[Term] | None:
    groups: list[list[Term]] = []
    affinity_terms = (placement.get("nodeAffinity") or {}).get("required")
    if affinity_terms:
        groups.append([copy_json(t) for t in affinity_terms])
    for anti_term in (placement.get("nodeAntiAffinity") or {}).get("required") or ():
        negated = _negated(nodeterms.negate_term, anti_term)
        if negated:  # None: the anti term matches no node; []: an empty anti term avoids none
            groups.append(negated)
    capacity = placement.get("capacity") or {}
    if capacity.get("require"):
        groups.append([{"matchExpressions": [capacity_requirement(provider(capacity), capacity["require"])]}])
    resource_terms = _resource_required(placement.get("resources") or {})
    if resource_terms:
        groups.append(resource_terms)
    if not groups:
        return None
    return and_dnf(groups)


def _preferred(placement: Mapping[str, Any]) -> list[Term]:
    out = [copy_json(t) for t in (placement.get("nodeAffinity") or {}).get("preferred") or ()]
    for pref in (placement.get("nodeAntiAffinity") or {}).get("preferred") or ():
        out.extend(_negated(nodeterms.negate_preferred, pref))
    capacity = placement.get("capacity") or {}
    if capacity.get("prefer"):
        expr = capacity_requirement(provider(capacity), capacity["prefer"])
        out.append({"weight": capacity.get("weight", 50), "preference": {"matchExpressions": [expr]}})
    out.extend(resourcelabels.resource_preferred(placement.get("resources") or {}))
    return dedupe(out, preferred_key)


def _spread(anti: Mapping[str, Any]) -> Spread | None:
    if not anti.get("spread"):
        return None
    return Spread(
        mode=str(anti["spread"]),
        topology_key=str(anti.get("topologyKey") or "kubernetes.io/hostname"),
        weight=int(anti.get("weight", 100)),
        label_selector=copy_json(anti.get("labelSelector")),
        match_label_keys=tuple(anti.get("matchLabelKeys") or ()),
    )
