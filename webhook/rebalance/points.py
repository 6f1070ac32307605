"""Preference points: what a node is worth to a pod (the scale of ``--min-gain``).

A node is worth the sum of the weights of the pod's preferred node-affinity terms it matches
(``NodeAffinity.Score`` of pkg/scheduler/framework/plugins/nodeaffinity in v1.20 sums exactly
these before NormalizeScore scales them to 0..100), plus ``spot_points`` when the pod is
interruptible and the node is spot. The terms are matched by the scheduler model's own
``PreferredTerms`` (which the NodeAffinity score plugin of the model uses too).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.kube.affinity import PREFERRED
from webhook.scheduler.nodeaffinity import PreferredTerms, node_identity
from webhook.scheduler.nodeinfo import NodeInfo
from webhook.spot.nodes import SPOT, UNKNOWN

__all__ = ["Landscape", "Node", "Preferences", "preferred_of"]


@dataclass(frozen=True, slots=True)
class Node:
    """A node as the decisions read it. ``info`` is None when the model cannot read the node
    (``error`` says why); ``reclaim`` says why it is about to be reclaimed, if it is."""

    name: str
    labels: Mapping[str, str]
    capacity: str
    reclaim: str | None
    unschedulable: bool
    info: NodeInfo | None
    error: str | None = None

    @property
    def landing(self) -> bool:
        """A node a moved pod may be meant for: readable, schedulable, not about to go."""
        return self.info is not None and self.reclaim is None and not self.unschedulable


@dataclass(frozen=True, slots=True)
class Preferences:
    """What one pod prefers: its preferred node-affinity terms and, when it is interruptible,
    spot capacity worth ``spot`` points (0: not interruptible)."""

    terms: PreferredTerms | None
    spot: int

    def points(self, node: Node) -> int:
        found = self.terms.score(node.labels, node.name) if self.terms is not None else 0
        return found + (self.spot if node.capacity == SPOT else 0)

    @property
    def keys(self) -> frozenset[str] | None:
        """The label keys the terms read; None when a term reads a field (the node's name)."""
        if self.terms is None:
            return frozenset()
        keys: set[str] = set()
        for _, term in self.terms.terms:
            if term.fields:
                return None
            keys.update(req.key for req in term.exprs)
        return frozenset(keys)


def preferred_of(spec: Mapping[str, Any]) -> Any:
    """The raw preferred node-affinity terms of a pod spec (None: the field is absent)."""
    return ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(PREFERRED)


class Landscape:
    """The nodes a moved pod may be meant for (``Node.landing``), grouped so that the best a pod
    could get anywhere is found without matching its terms against every node: nodes alike in
    the label keys a pod's terms read (and in capacity) score alike, and a cluster of 5,000
    nodes has few such groups for the keys policies write (zone, capacity, instance type)."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.nodes = [n for n in nodes if n.landing]
        self._groups: dict[frozenset[str], list[Node]] = {}
        self._terms: dict[str, PreferredTerms | None] = {}
        self._keys: dict[int, str] = {}
        self._held: list[Any] = []
        self._best: dict[tuple[int, int], int] = {}

    def terms(self, raw: Any) -> PreferredTerms | None:
        """``PreferredTerms`` of raw terms, parsed once per distinct list (pods of one owner
        carry the same one). ``ValueError`` for a term the scheduler cannot parse."""
        if raw is None:
            return None
        key = self._keys.get(id(raw))
        if key is None:
            key = self._keys[id(raw)] = json.dumps(raw, sort_keys=True, separators=(",", ":"), default=str)
            self._held.append(raw)  # an id is a key only while its object lives
        if key not in self._terms:
            try:
                self._terms[key] = PreferredTerms(raw)
            except ValueError as exc:
                raise ValueError(str(exc)) from None
        found = self._terms[key]
        return found if found is None or found.terms else None

    def best(self, prefs: Preferences) -> int:
        """The most points any landing node is worth to the pod (0 with no landing node)."""
        cache_key = (id(prefs.terms), prefs.spot)
        found = self._best.get(cache_key)
        if found is None:
            found = self._best[cache_key] = max((prefs.points(n) for n in self._representatives(prefs)), default=0)
        return found

    def _representatives(self, prefs: Preferences) -> list[Node]:
        keys = prefs.keys
        if keys is None:
            return self.nodes
        group = self._groups.get(keys)
        if group is None:
            ordered = sorted(keys)
            seen: dict[tuple[Any, ...], Node] = {}
            for node in self.nodes:
                seen.setdefault((node.capacity, *(node.labels.get(k) for k in ordered)), node)
            group = self._groups[keys] = list(seen.values())
        return group


def read_node(obj: Mapping[str, Any], judge: Callable[[Mapping[str, Any]], tuple[str, str | None]]) -> Node:
    """A ``Node``, its capacity and reclaim signal given by ``judge``; unreadable (``info``
    None, capacity unknown) when the scheduler model or ``judge`` cannot read it."""
    labels, name = node_identity(obj)
    unschedulable = bool((obj.get("spec") or {}).get("unschedulable"))
    try:
        capacity, reclaim = judge(obj)
    except (ValueError, TypeError, AttributeError) as exc:
        return Node(name, labels, UNKNOWN, None, unschedulable, None, f"node {name} cannot be read: {exc}")
    try:
        info = NodeInfo(obj)
    except (ValueError, TypeError, AttributeError) as exc:
        return Node(name, labels, capacity, reclaim, unschedulable, None, f"node {name} cannot be read: {exc}")
    return Node(name, labels, capacity, reclaim, unschedulable, info)
