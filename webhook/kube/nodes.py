"""Node predicates of the kube-scheduler's filters, over Node and pod-spec dicts.

``requirement_matches`` and ``term_matches`` follow ``nodeaffinity.NodeSelector`` of
k8s.io/component-helpers/scheduling/corev1/nodeaffinity; ``tolerates`` is
``Toleration.ToleratesTaint`` of k8s.io/api/core/v1; ``node_eligible`` combines the
NodeAffinity (with nodeSelector), TaintToleration and NodeUnschedulable filters, so the
rollout rules count the nodes the scheduler would consider.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _as_int(text: Any) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def requirement_matches(req: Mapping[str, Any], value: str | None) -> bool:
    """One NodeSelectorRequirement against a label (or field) value; None: key absent.

    As ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``: NotIn and DoesNotExist
    match a node without the key; Gt/Lt need the key and an integer value on both sides.
    """
    op = req.get("operator")
    values = [str(v) for v in req.get("values") or ()]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        have, want = _as_int(value), _as_int(values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A NodeSelectorTerm: its expressions and fields are ANDed; an empty term matches nothing."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    if not all(requirement_matches(e, _label(labels, e.get("key"))) for e in exprs):
        return False
    # The only field the API allows in matchFields is metadata.name.
    name = meta.get("name")
    return all(requirement_matches(f, name if f.get("key") == "metadata.name" else None) for f in fields)


def _label(labels: Mapping[str, Any], key: Any) -> str | None:
    value = labels.get(key)
    return None if value is None else str(value)


def terms_match(terms: Sequence[Mapping[str, Any]] | None, node: Mapping[str, Any]) -> bool:
    """Required node affinity: the terms are ORed; no terms at all means no constraint."""
    if terms is None:
        return True
    return any(term_matches(t, node) for t in terms)


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint`` of k8s.io/api/core/v1."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    return op == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def _node_taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    if spec.get("unschedulable"):
        # The NodeUnschedulable plugin treats a cordoned node as carrying this taint.
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    return taints


def node_eligible(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether the scheduler's filters on nodeSelector, required node affinity and
    NoSchedule/NoExecute taints let this pod spec run on the node."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if _label(labels, key) != str(value):
            return False
    node_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not terms_match(required.get("nodeSelectorTerms") or [], node):
        return False
    tolerations = pod_spec.get("tolerations") or []
    for taint in _node_taints(node):
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return False
    return True
