"""What the engine may know about the cluster: the ``ClusterView`` protocol and a static view.

``ClusterView`` is what the engine asks: namespace labels, nodes, priority classes and
whether pod affinity terms may use ``matchLabelKeys``. ``None`` anywhere means "no view";
the checks that need one are skipped with a note. ``StaticClusterView`` is the in-memory
implementation used by tests and dry-runs; the server's watch-backed cache implements the
same protocol.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from webhook.kube import objects


class NodeSet(tuple):  # type: ignore[type-arg]
    """An immutable sequence of Node objects with a memo for answers derived from it.

    Views return the same ``NodeSet`` until a node changes, so a derived answer (the
    eligible topology domains of a pod spec, say) is computed once per node set rather than
    once per admission review: admission reads memory only, and a scan of 5,000 nodes on
    every review would cost it milliseconds.
    """

    MEMO_LIMIT = 4096  # distinct questions kept per node set; cleared wholesale past it

    def memo(self) -> dict[Any, Any]:
        """The memo of this node set; it lives and dies with the set."""
        table: dict[Any, Any] | None = self.__dict__.get("_memo")
        if table is None or len(table) >= self.MEMO_LIMIT:
            table = self.__dict__["_memo"] = {}
        return table


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
        object.__setattr__(self, "node_list", NodeSet(nodes))
        object.__setattr__(self, "priority_classes", dict(priority_classes or {}))
        object.__setattr__(self, "match_label_keys", match_label_keys)

    @classmethod
    def from_objects(
        cls, items: Iterable[Mapping[str, Any]], *, match_label_keys: bool | None = None
    ) -> StaticClusterView:
        """Build a view from Kubernetes objects (Nodes, Namespaces, PriorityClasses, Lists).

        Other kinds are ignored, so a whole ``kubectl get -o yaml`` dump can be passed.
        """
        groups = objects.by_kind(objects.flatten(items))
        namespaces = {name: dict((ns.get("metadata") or {}).get("labels") or {})
                      for ns in groups.get("Namespace", ()) if (name := _name(ns))}
        classes = {name: pc for pc in groups.get("PriorityClass", ()) if (name := _name(pc))}
        nodes = groups.get("Node", [])
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


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
