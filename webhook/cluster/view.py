"""The optional view of the cluster (SPEC 4.4), and the scheduler's node predicates.

``ClusterView`` is what the engine asks: namespace labels, nodes, priority classes and
whether pod affinity terms may use ``matchLabelKeys``. ``None`` anywhere means "no view";
the checks that need one are skipped with a note. ``StaticClusterView`` is the in-memory
implementation used by tests and dry-runs; the server's watch-backed cache implements the
same protocol.

The predicates below (``term_matches``, ``tolerates``, ``node_eligible``) follow the
scheduler's NodeAffinity and TaintToleration plugins, so the rollout rules count the same
nodes the scheduler would consider.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class ClusterView(Protocol):
    """Read-only facts about the cluster the engine may use."""

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        """Labels of a namespace, or None when the namespace is unknown."""

    def nodes(self) -> Sequence[Mapping[str, Any]]:
        """Node objects as the API returns them."""

    def priority_class(self, name: str) -> Mapping[str, Any] | None:
        """The PriorityClass object, or None when unknown."""

    def supports_match_label_keys(self) -> bool | None:
        """Whether pod affinity terms honour ``matchLabelKeys`` (None: unknown)."""


@dataclass(frozen=True)
class StaticClusterView:
    """An in-memory ``ClusterView``: fixed namespaces, nodes and priority classes."""

    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    node_list: Sequence[Mapping[str, Any]] = ()
    priority_classes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    match_label_keys: bool | None = None

    def __init__(
        self,
        *,
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        nodes: Sequence[Mapping[str, Any]] = (),
        priority_classes: Mapping[str, Mapping[str, Any]] | None = None,
        match_label_keys: bool | None = None,
    ) -> None:
        object.__setattr__(self, "namespaces", dict(namespaces or {}))
        object.__setattr__(self, "node_list", tuple(nodes))
        object.__setattr__(self, "priority_classes", dict(priority_classes or {}))
        object.__setattr__(self, "match_label_keys", match_label_keys)

    @classmethod
    def from_objects(
        cls, objects: Iterable[Mapping[str, Any]], *, match_label_keys: bool | None = None
    ) -> StaticClusterView:
        """Build a view from Kubernetes objects (Nodes, Namespaces, PriorityClasses, Lists).

        Other kinds are ignored, so a whole ``kubectl get -o yaml`` dump can be passed.
        """
        namespaces: dict[str, Mapping[str, str]] = {}
        nodes: list[Mapping[str, Any]] = []
        classes: dict[str, Mapping[str, Any]] = {}
        for obj in _flatten(objects):
            kind = obj.get("kind")
            name = str((obj.get("metadata") or {}).get("name") or "")
            if kind == "Node":
                nodes.append(obj)
            elif kind == "Namespace" and name:
                namespaces[name] = dict((obj.get("metadata") or {}).get("labels") or {})
            elif kind == "PriorityClass" and name:
                classes[name] = obj
        return cls(
            namespaces=namespaces, nodes=nodes, priority_classes=classes, match_label_keys=match_label_keys
        )

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        return self.namespaces.get(name)

    def nodes(self) -> Sequence[Mapping[str, Any]]:
        return self.node_list

    def priority_class(self, name: str) -> Mapping[str, Any] | None:
        return self.priority_classes.get(name)

    def supports_match_label_keys(self) -> bool | None:
        return self.match_label_keys


def _flatten(objects: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    for obj in objects:
        if not isinstance(obj, Mapping):
            continue
        if str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
            yield from _flatten(obj["items"])
        else:
            yield obj


# --- scheduler predicates -------------------------------------------------------------


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
